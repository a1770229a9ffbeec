package transport_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
)

// TestCallLogLevels: every call logs one "rpc" line; a successful call at
// debug level, a caller's error at info (as the interceptor's doc says).
func TestCallLogLevels(t *testing.T) {
	var logs nodetest.LogBuffer
	_, url := nodetest.Serve(t, node.Config{Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	c := kiokuv1connect.NewSessionServiceClient(http.DefaultClient, url)
	if _, err := c.CreateSession(t.Context(), connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: "apps/a/users/u", SessionId: "s"})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSession(t.Context(), connect.NewRequest(&kiokuv1.GetSessionRequest{Name: "apps/a/users/u/sessions/nope"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("GetSession of a missing session: %v", err)
	}
	levels := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec struct{ Level, Msg, Procedure, Code string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "rpc" {
			levels[rec.Procedure+" "+rec.Code] = rec.Level
		}
	}
	for call, want := range map[string]string{
		kiokuv1connect.SessionServiceCreateSessionProcedure + " ok":     "DEBUG",
		kiokuv1connect.SessionServiceGetSessionProcedure + " not_found": "INFO",
	} {
		if levels[call] != want {
			t.Errorf("%s logged at %q, want %s (all: %v)", call, levels[call], want, levels)
		}
	}
}
