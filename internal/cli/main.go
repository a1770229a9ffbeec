package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Main runs a command: run with the command line's arguments, on a
// context that ends at an interrupt or SIGTERM. It exits 0 when help was
// asked for and printed (flag.ErrHelp), and 2 after printing any other
// error after the command's name; it returns when run succeeds.
func Main(name string, run func(ctx context.Context, args []string) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0) // help was asked for and printed: not a failure
		}
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(2)
	}
}
