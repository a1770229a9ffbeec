// Package exampletest starts what the Example functions of kioku's public
// packages (client, client/adk, agent) stand in for, so that they run, and
// their output is checked, as a reader's program runs against a real
// server: a kioku with an embedded store on a loopback port, and a fake
// Gemini API (package modeltest) that the real genai client reaches through
// the environment, as a program with a real key reaches Gemini.
//
// The docs test (package docs) shows an Example's body in the pages
// without the lines that call this package.
package exampletest

import (
	"context"
	"io"
	"log"
	"log/slog"
	"net/http/httptest"
	"os"

	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/model/modeltest"
)

// StartKioku serves a kioku with a fresh embedded store and returns its
// URL and the function that stops it and removes the store. It ends the
// program if kioku does not start.
func StartKioku() (url string, stop func()) {
	dir, err := os.MkdirTemp("", "kioku-example-")
	if err != nil {
		log.Fatal(err)
	}
	n, err := node.Open(context.Background(), node.Config{DataDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(n.Handler())
	srv.Config = n.HTTPServer()
	srv.Start()
	return srv.URL, func() {
		srv.Close()
		n.Close()
		os.RemoveAll(dir)
	}
}

// StartGemini serves a fake Gemini API that answers every generation call
// with reply, and points GEMINI_API_KEY and GOOGLE_GEMINI_BASE_URL at it
// (genai.NewClient reads both). It returns the function that stops it and
// clears the two variables.
func StartGemini(reply modeltest.Reply) (stop func()) {
	fake, stopFake := modeltest.StartGemini()
	fake.SetResponder(func(modeltest.Call) modeltest.Reply { return reply })
	os.Setenv("GEMINI_API_KEY", "example-key")
	os.Setenv("GOOGLE_GEMINI_BASE_URL", fake.URL)
	return func() {
		os.Unsetenv("GEMINI_API_KEY")
		os.Unsetenv("GOOGLE_GEMINI_BASE_URL")
		stopFake()
	}
}
