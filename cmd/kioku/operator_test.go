package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/internal/transport/auth"
	"github.com/kioku-ai/kioku/memorybank"
	"github.com/kioku-ai/kioku/resource"
)

// operatorServer is a real kioku behind API keys, with an operator key
// for the commands and a client that seeded it.
type operatorServer struct {
	t   *testing.T
	url string
	key string
	c   *client.Client
}

func newOperatorServer(t *testing.T) *operatorServer {
	key, entry := auth.NewKey("operator", auth.AllApps, "")
	_, url := nodetest.Serve(t, node.Config{Keys: nodetest.Keys(t, entry)})
	return &operatorServer{t: t, url: url, key: key, c: client.New(url, client.WithAuthToken(key))}
}

// kioku runs "kioku ARGS --server URL --key KEY" and returns its output;
// it fails the test on an error unless wantErr.
func (s *operatorServer) kioku(wantErr bool, args ...string) (stdout, stderr string, err error) {
	s.t.Helper()
	var out, errb bytes.Buffer
	err = operator(s.t.Context(), args[0], append(args[1:], "--server", s.url, "--key", s.key), &out, &errb)
	if (err != nil) != wantErr {
		s.t.Fatalf("kioku %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String(), errb.String(), err
}

// has fails the test unless out contains every string.
func has(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("%s printed\n%s\nwithout %q", what, out, w)
		}
	}
}

func TestOperatorCommands(t *testing.T) {
	t.Parallel()
	s := newOperatorServer(t)
	ctx := t.Context()
	c := s.c

	// Two sessions of ann; the first has three events, with a tool call and
	// a user: state change.
	s1 := resource.SessionName("demo", "ann", "s1")
	for _, id := range []string{"s1", "s2"} {
		if _, err := c.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: resource.UserName("demo", "ann"), SessionId: id,
			Session: &kiokuv1.Session{DisplayName: "chat " + id, Labels: map[string]string{"team": "core"}}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ev := range []*kiokuv1.Event{
		{Author: "user", Content: client.Text("user", "I prefer tea."), Actions: &kiokuv1.EventActions{StateDelta: client.Delta(map[string]any{"user:drink": "tea"})}},
		{Author: "agent", Content: &kiokuv1.Content{Role: "model", Parts: []*kiokuv1.Part{{FunctionCall: &kiokuv1.FunctionCall{Name: "save_to_memory", Args: client.Delta(map[string]any{"fact": "Ann prefers tea."})}}}}},
		{Author: "agent", Content: client.Text("model", "Noted: tea it is.")},
	} {
		if _, err := c.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: s1, Event: ev}); err != nil {
			t.Fatal(err)
		}
	}

	out, _, _ := s.kioku(false, "sessions", "list", "apps/demo/users/ann")
	has(t, "sessions list", out, "SESSION", "DISPLAY NAME", s1, "chat s1", resource.SessionName("demo", "ann", "s2"), "team=core")
	out, _, _ = s.kioku(false, "sessions", "list", "apps/demo", "--json")
	var sessions []map[string]any
	if err := json.Unmarshal([]byte(out), &sessions); err != nil || len(sessions) != 2 {
		t.Fatalf("sessions list --json: %v\n%s", err, out)
	}
	out, _, _ = s.kioku(false, "sessions", "get", s1)
	has(t, "sessions get", out, "name:", s1, "events:", "3", "user:drink", `"tea"`, "I prefer tea.", "call save_to_memory", "Noted: tea it is.")
	out, errOut, _ := s.kioku(false, "sessions", "events", "--newest-first", "--limit", "1", s1)
	has(t, "sessions events --newest-first --limit 1", out, "SEQ", "Noted: tea it is.")
	has(t, "sessions events --limit 1 (stderr)", errOut, "the first 1")
	if strings.Contains(out, "I prefer tea.") {
		t.Fatalf("sessions events --limit 1 printed more than the newest event:\n%s", out)
	}

	// State without a session.
	out, _, _ = s.kioku(false, "state", "get", "apps/demo/users/ann")
	has(t, "state get", out, "apps/demo/users/ann/state", "user:drink", `"tea"`)
	s.kioku(false, "state", "set", "apps/demo/users/ann/state", "--set", "user:level=3", "--set", "user:drink=null", "--set", "user:nick=Annie")
	st, err := c.GetState(ctx, &kiokuv1.GetStateRequest{Name: resource.UserStateName("demo", "ann")})
	if err != nil {
		t.Fatal(err)
	}
	if m := st.GetState().AsMap(); m["user:level"] != 3.0 || m["user:nick"] != "Annie" || m["user:drink"] != nil {
		t.Fatalf("after state set: %v", m)
	}

	// Memories from direct facts, through an operation.
	op, err := c.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{Parent: resource.AppName("demo"), Scope: client.Scope("ann"),
		Source: client.Facts("Ann lives in Sapporo.", "Ann prefers green tea.")})
	if err != nil {
		t.Fatal(err)
	}
	out, _, _ = s.kioku(false, "ops", "wait", op.GetName())
	has(t, "ops wait", out, "state:", "SUCCEEDED", "done:", "true", "ACTION", "CREATED", "Ann lives in Sapporo.")
	out, _, _ = s.kioku(false, "ops", "list", "apps/demo")
	has(t, "ops list", out, "OPERATION", op.GetName(), "GenerateMemories", "SUCCEEDED")
	out, _, _ = s.kioku(false, "ops", "get", op.GetName(), "--json")
	var opJSON struct {
		Name string
		Done bool
	}
	if err := json.Unmarshal([]byte(out), &opJSON); err != nil || opJSON.Name != op.GetName() || !opJSON.Done {
		t.Fatalf("ops get --json: %v\n%s", err, out)
	}
	_, _, err = s.kioku(true, "ops", "cancel", op.GetName())
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("ops cancel of a finished operation: %v", err)
	}

	out, _, _ = s.kioku(false, "memories", "list", "apps/demo", "--scope", "user_id=ann")
	has(t, "memories list", out, "MEMORY", "FACT", "Ann lives in Sapporo.", "Ann prefers green tea.", "user_id=ann")
	out, _, _ = s.kioku(false, "memories", "list", "apps/demo", "--json")
	var mems []struct{ Name, Fact string }
	if err := json.Unmarshal([]byte(out), &mems); err != nil || len(mems) != 2 {
		t.Fatalf("memories list --json: %v\n%s", err, out)
	}
	sapporo := mems[0].Name
	if !strings.Contains(mems[0].Fact, "Sapporo") {
		sapporo = mems[1].Name
	}
	out, _, _ = s.kioku(false, "memories", "retrieve", "apps/demo", "--scope", "user_id=ann", "--query", "Where does Ann live?", "--top-k", "1")
	has(t, "memories retrieve", out, "DISTANCE", "Ann lives in Sapporo.")
	if strings.Contains(out, "green tea") {
		t.Fatalf("memories retrieve --top-k 1 printed two memories:\n%s", out)
	}
	out, _, _ = s.kioku(false, "memories", "get", sapporo)
	has(t, "memories get", out, "fact:", "Ann lives in Sapporo.", "scope:", "user_id=ann", "revision:", "1")
	out, _, _ = s.kioku(false, "memories", "delete", sapporo)
	has(t, "memories delete", out, "deleted "+sapporo)
	if _, err := c.GetMemory(ctx, &kiokuv1.GetMemoryRequest{Name: sapporo}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("the deleted memory: %v", err)
	}
	out, _, _ = s.kioku(false, "memories", "revisions", sapporo)
	has(t, "memories revisions", out, "REV", "DELETED", "CREATED")

	// The memory bank configuration: only the fields given change.
	cfgFile := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(cfgFile, []byte(`{"managed_topics": ["USER_PREFERENCES"], "memoryTtl": "2592000s"}`), 0o644)
	out, _, _ = s.kioku(false, "config", "set", "apps/demo", "--file", cfgFile)
	has(t, "config set", out, "managed topics:", "USER_PREFERENCES", "memory ttl:", "720h0m0s")
	os.WriteFile(cfgFile, []byte(`{"generation_trigger": {"event_count": 10}}`), 0o644)
	s.kioku(false, "config", "set", "apps/demo", "--file", cfgFile)
	out, _, _ = s.kioku(false, "config", "get", "apps/demo")
	has(t, "config get", out, "USER_PREFERENCES", "720h0m0s", "generate every:", "10 new events")
	os.WriteFile(cfgFile, []byte(`{"piiRedaction": {"enabled": true, "categories": ["EMAIL", "PHONE"], "customPatterns": [{"name": "EMPLOYEE_ID", "regex": "EMP-[0-9]{6}"}]}}`), 0o644)
	out, _, _ = s.kioku(false, "config", "set", "apps/demo", "--file", cfgFile)
	has(t, "config set pii_redaction", out, "pii redaction:", "on: EMAIL, PHONE and 1 custom pattern(s)", "generate every:", "10 new events")
	os.WriteFile(cfgFile, []byte(`{"piiRedaction": {"enabled": true, "customPatterns": [{"name": "BAD", "regex": "(?=x)"}]}}`), 0o644)
	if _, _, err := s.kioku(true, "config", "set", "apps/demo", "--file", cfgFile); err == nil || !strings.Contains(err.Error(), "pii_redaction.custom_patterns[0] (BAD): regex is not valid RE2") {
		t.Fatalf("config set with a bad pattern: %v", err)
	}
	os.WriteFile(cfgFile, []byte(`{"managed_topicz": []}`), 0o644)
	if _, _, err := s.kioku(true, "config", "set", "apps/demo", "--file", cfgFile); err == nil || !strings.Contains(err.Error(), "managed_topicz") {
		t.Fatalf("config set with an unknown field: %v", err)
	}

	// Deleting a session.
	out, _, _ = s.kioku(false, "sessions", "delete", s1)
	has(t, "sessions delete", out, "deleted "+s1)
	if _, err := c.GetSession(ctx, &kiokuv1.GetSessionRequest{Name: s1}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("the deleted session: %v", err)
	}

	// Errors: the server's, and the command line's.
	if _, _, err := s.kioku(true, "sessions", "get", resource.SessionName("demo", "ann", "nope")); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("sessions get of a missing session: %v", err)
	}
	var out2, err2 bytes.Buffer
	if err := operator(ctx, "sessions", []string{"list", "apps/demo", "--server", s.url}, &out2, &err2); connect.CodeOf(err) != connect.CodeUnauthenticated ||
		!strings.Contains(err.Error(), "--key KEY or the environment variable KIOKU_KEY") {
		t.Fatalf("without --key: %v; want UNAUTHENTICATED naming --key and KIOKU_KEY", err)
	}
	if err := operator(ctx, "sessions", []string{"list", "apps/demo", "--server", s.url, "--key", "kioku_wrong"}, &out2, &err2); connect.CodeOf(err) != connect.CodeUnauthenticated ||
		!strings.Contains(err.Error(), "(--key or KIOKU_KEY) was refused") {
		t.Fatalf("with a wrong --key: %v; want UNAUTHENTICATED naming --key and KIOKU_KEY", err)
	}
	if _, _, err := s.kioku(true, "sessions", "get"); err == nil || !strings.Contains(err.Error(), "takes one argument") {
		t.Fatalf("sessions get without a name: %v", err)
	}
	if _, _, err := s.kioku(true, "sessions", "frobnicate", "x"); err == nil || !strings.Contains(err.Error(), `unknown sessions subcommand "frobnicate"`) {
		t.Fatalf("an unknown subcommand: %v", err)
	}
}

// TestQuotaCommand: kioku quota get shows an app's generations of today
// against --quota-generations, as a table and as JSON, and an app that
// has made none at zero; a user key may not read it.
func TestQuotaCommand(t *testing.T) {
	t.Parallel()
	key, entry := auth.NewKey("operator", auth.AllApps, "")
	userKey, userEntry := auth.NewKey("ann", "q", "ann")
	_, url := nodetest.Serve(t, node.Config{Keys: nodetest.Keys(t, entry, userEntry), Quotas: memorybank.Quotas{Generations: 5}})
	s := &operatorServer{t: t, url: url, key: key, c: client.New(url, client.WithAuthToken(key))}
	for range 3 {
		if _, err := s.c.GenerateMemories(t.Context(), &kiokuv1.GenerateMemoriesRequest{
			Parent: "apps/q", Scope: client.Scope("ann"),
			Source: &kiokuv1.GenerateMemoriesRequest_DirectMemoriesSource{DirectMemoriesSource: &kiokuv1.DirectMemoriesSource{
				Memories: []*kiokuv1.DirectMemory{{Fact: "The user likes tea."}},
			}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	today := time.Now().UTC().Format(time.DateOnly)

	out, _, _ := s.kioku(false, "quota", "get", "apps/q")
	has(t, "kioku quota get", out, "apps/q/quotaUsage", today, "generations", "3 of 5", "model tokens", "0 (no quota)", "resets")
	out, _, _ = s.kioku(false, "quota", "get", "apps/idle/quotaUsage")
	has(t, "kioku quota get of an idle app", out, "0 of 5")

	out, _, _ = s.kioku(false, "quota", "get", "apps/q", "--json")
	var got struct {
		Name            string `json:"name"`
		Day             string `json:"day"`
		Generations     string `json:"generations"`
		GenerationQuota string `json:"generationQuota"`
		ResetTime       string `json:"resetTime"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("kioku quota get --json printed %s: %v", out, err)
	}
	if got.Name != "apps/q/quotaUsage" || got.Day != today || got.Generations != "3" || got.GenerationQuota != "5" || got.ResetTime == "" {
		t.Fatalf("kioku quota get --json = %+v", got)
	}

	s.key = userKey
	if _, _, err := s.kioku(true, "quota", "get", "apps/q"); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("a user key reading the quota usage: %v; want PERMISSION_DENIED", err)
	}
}

// TestFilesCommands runs kioku files list|cat|view|revisions|rm against a
// real server whose memory files a model wrote through Execute.
func TestFilesCommands(t *testing.T) {
	t.Parallel()
	s := newOperatorServer(t)
	for _, in := range []map[string]any{
		{"command": "create", "path": "/memories/notes.md", "file_text": "Ann likes tea.\n"},
		{"command": "str_replace", "path": "/memories/notes.md", "old_str": "tea", "new_str": "green tea"},
		{"command": "create", "path": "/memories/projects/kioku.md", "file_text": "ship it\n"},
		{"command": "create", "path": "/memories/old.md", "file_text": "old"},
		{"command": "delete", "path": "/memories/old.md"},
	} {
		input, _ := structpb.NewStruct(in)
		res, err := s.c.Execute(t.Context(), &kiokuv1.ExecuteRequest{Parent: "apps/a/users/ann", Input: input})
		if err != nil || res.GetIsError() {
			t.Fatalf("Execute(%v) = %v, %v", in, res, err)
		}
	}

	out, _, _ := s.kioku(false, "files", "list", "apps/a/users/ann")
	has(t, "files list", out, "PATH", "BYTES", "REV", "/memories/notes.md", "21", "/memories/projects/kioku.md", "apps/a/users/ann/memoryFiles/")
	if strings.Contains(out, "old.md") {
		t.Errorf("files list shows a deleted file:\n%s", out)
	}
	out, _, _ = s.kioku(false, "files", "list", "apps/a/users/ann", "--deleted")
	has(t, "files list --deleted", out, "/memories/old.md (deleted)")
	out, _, _ = s.kioku(false, "files", "list", "apps/a/users/ann/memories/projects", "--json")
	var listed []map[string]any
	if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed) != 1 || listed[0]["path"] != "/memories/projects/kioku.md" {
		t.Errorf("files list of a directory --json = %q (%v)", out, err)
	}

	out, _, _ = s.kioku(false, "files", "cat", "apps/a/users/ann/memories/notes.md")
	if out != "Ann likes green tea.\n" {
		t.Errorf("files cat = %q", out)
	}
	out, _, _ = s.kioku(false, "files", "view", "apps/a/users/ann/memories")
	has(t, "files view", out, "Here're the files and directories up to 2 levels deep in /memories", "21B\t/memories/notes.md", "8B\t/memories/projects/")
	out, _, _ = s.kioku(false, "files", "view", "apps/a/users/ann/memories/notes.md")
	has(t, "files view of a file", out, "     1\tAnn likes green tea.")
	out, _, _ = s.kioku(false, "files", "revisions", "apps/a/users/ann/memories/notes.md")
	has(t, "files revisions", out, "REV", "ACTION", "EDITED", "CREATED", "Ann likes green tea.")

	// Names that are not files are refused with a reason.
	_, _, err := s.kioku(true, "files", "cat", "apps/a/users/ann/memories/projects")
	if err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("files cat of a directory: %v", err)
	}
	_, _, err = s.kioku(true, "files", "cat", "apps/a/users/ann/memories/none.md")
	if err == nil || !strings.Contains(err.Error(), "has no memory file at /memories/none.md") {
		t.Errorf("files cat of nothing: %v", err)
	}
	_, _, err = s.kioku(true, "files", "view", "apps/a/users/ann/memories/../etc/passwd")
	if err == nil || !strings.Contains(err.Error(), "is not allowed") {
		t.Errorf("files view outside /memories: %v", err)
	}

	out, _, _ = s.kioku(false, "files", "rm", "apps/a/users/ann/memories/projects")
	has(t, "files rm", out, "Successfully deleted /memories/projects")
	out, _, _ = s.kioku(false, "files", "list", "apps/a/users/ann")
	if strings.Contains(out, "kioku.md") {
		t.Errorf("files list after rm:\n%s", out)
	}
	if _, _, err := s.kioku(true, "files", "rm", "apps/a/users/ann"); err == nil || !strings.Contains(err.Error(), "names a user") {
		t.Errorf("files rm of a whole user: %v", err)
	}
}
