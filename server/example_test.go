package server_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/resource"
	"github.com/kioku-ai/kioku/server"
)

// Example mounts kioku on a program's own http.ServeMux, beside the
// program's route /hello, under one http.Server, and calls both: the route
// with net/http, kioku with the Go client.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "kioku-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	kioku, err := server.New(ctx, server.Options{
		DataDir: dir,
		Logger:  slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer kioku.Close() // after the http.Server's Shutdown below

	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello from the program")
	})
	mux.Handle("/", kioku)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Shutdown(ctx)
	url := "http://" + ln.Addr().String()

	res, err := http.Get(url + "/hello")
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	fmt.Print(string(body))

	c := client.New(url)
	s, err := c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{
		Parent:    resource.UserName("demo", "ann"),
		SessionId: "first",
	})
	if err != nil {
		log.Fatal(err)
	}
	appended, err := c.AppendEvent(ctx, &kiokuv1.AppendEventRequest{
		Name:  s.GetName(),
		Event: &kiokuv1.Event{Author: "user", Content: client.Text("user", "I prefer tea.")},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.GetName(), "event", appended.GetEvent().GetSequence())
	// Output:
	// hello from the program
	// apps/demo/users/ann/sessions/first event 1
}
