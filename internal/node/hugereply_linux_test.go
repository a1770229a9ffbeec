//go:build linux

package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/modeltest"
	"github.com/kioku-ai/kioku/resource"
)

// childEnv names the scenario a re-executed test binary runs (TestMain)
// instead of the tests: the maximum reply size, in bytes.
const childEnv = "KIOKU_NODE_TEST_HUGE_REPLY"

func TestMain(m *testing.M) {
	if v := os.Getenv(childEnv); v != "" {
		if err := hugeReplyChild(v); err != nil {
			fmt.Println("ERROR:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// hugeFacts is the number of facts of the huge reply: about 5 MB of JSON.
const hugeFacts = 37000

// TestHugeReplyBoundedMemory: a model that answers an extraction with
// 37,000 facts (a 5.4 MB reply) has its reply refused, the attempt failed
// retryably, and the server's peak memory stays far below 500 MB: read in
// a process of its own (this test binary, re-executed), under the default
// reply limit (refused unread past 1 MiB) and under a limit raised to
// 64 MiB (decoded, then refused for its number of facts).
func TestHugeReplyBoundedMemory(t *testing.T) {
	for _, tc := range []struct {
		limit int64
		want  string
	}{
		{model.DefaultCallLimits.MaxReplyBytes, "more than 1048576 bytes, the limit (--model-max-reply)"},
		{64 << 20, fmt.Sprintf("lists %d facts; the limit is 500", hugeFacts)},
	} {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", childEnv, tc.limit))
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("limit %d: the server process: %v\n%s", tc.limit, err, out)
		}
		if !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), "memories: 0") {
			t.Fatalf("limit %d: the attempt did not fail saying %q, with no memories:\n%s", tc.limit, tc.want, out)
		}
		peak := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // KiB on Linux
		t.Logf("reply limit %d: a %d-fact reply refused; peak RSS of the server's process %d MB", tc.limit, hugeFacts, peak>>20)
		if peak > 500<<20 {
			t.Errorf("limit %d: peak RSS %d MB, want under 500 MB", tc.limit, peak>>20)
		}
	}
}

// hugeReplyChild serves a node whose model (a fake Gemini in the same
// process) answers extractions with hugeFacts facts, generates from a
// session, waits for the first attempt to fail and prints its progress.
func hugeReplyChild(limit string) error {
	var maxReply int64
	if _, err := fmt.Sscan(limit, &maxReply); err != nil {
		return err
	}
	facts := make([]any, hugeFacts)
	for i := range facts {
		facts[i] = map[string]any{"fact": fmt.Sprintf("The user remembers detail number %d of a long story told by the fire on a rainy evening.", i), "topic": "USER_PERSONAL_INFO", "events": []int{1}}
	}
	reply, err := json.Marshal(map[string]any{"facts": facts})
	if err != nil {
		return err
	}
	facts = nil
	fmt.Printf("reply: %d bytes\n", len(reply))
	fake, stop := modeltest.StartGemini()
	defer stop()
	fake.SetResponder(func(modeltest.Call) modeltest.Reply { return modeltest.Reply{Text: string(reply)} })

	dir, err := os.MkdirTemp("", "kioku-huge-reply")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, err := node.Open(ctx, node.Config{
		DataDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Models: model.Config{Provider: "gemini", GeminiAPIKey: "k", GeminiBaseURL: fake.URL, Limits: model.CallLimits{MaxReplyBytes: maxReply}},
	})
	if err != nil {
		return err
	}
	defer n.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	sctx, stopServing := context.WithCancel(ctx)
	go func() { served <- n.Serve(sctx, ln) }()
	defer func() {
		stopServing()
		<-served
	}()
	c := client.New("http://" + ln.Addr().String())
	sess, err := c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: resource.UserName("demo", "ann")})
	if err != nil {
		return err
	}
	if _, err := c.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: sess.GetName(), Event: &kiokuv1.Event{Author: "user", Content: client.Text("user", "Let me tell you a long story.")}}); err != nil {
		return err
	}
	op, err := c.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{Parent: resource.AppName("demo"), Source: client.FromSession(sess.GetName())})
	if err != nil {
		return err
	}
	for {
		got, err := c.GetOperation(ctx, &kiokuv1.GetOperationRequest{Name: op.GetName()})
		if err != nil {
			return err
		}
		md, err := client.Metadata(got)
		if err != nil {
			return err
		}
		// Retries may come at once (full jitter): any failed attempt will do.
		msg := md.GetProgressMessage()
		if got.GetDone() {
			msg = got.GetError().GetMessage()
		}
		if got.GetDone() || strings.HasPrefix(msg, "attempt ") && strings.Contains(msg, " failed (") {
			fmt.Println("failed:", msg)
			list, err := c.ListMemories(ctx, &kiokuv1.ListMemoriesRequest{Parent: resource.AppName("demo")})
			if err != nil {
				return err
			}
			fmt.Println("memories:", len(list.GetMemories()))
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}
