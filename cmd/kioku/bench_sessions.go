package main

import (
	"context"
	"errors"
)

func benchSessions(ctx context.Context, args []string) error { return errors.New("todo") }
