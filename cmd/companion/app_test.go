package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/internal/node/nodetest"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/model/modeltest"
	"github.com/kioku-ai/kioku/resource"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestNextAffinity(t *testing.T) {
	for _, c := range []struct{ prev, proposed, want int }{
		{50, 55, 55}, {50, 95, 60}, {50, 0, 40}, {95, 100, 100}, {98, 120, 100}, {3, -50, 0}, {60, 60, 60},
	} {
		if got := nextAffinity(c.prev, c.proposed); got != c.want {
			t.Errorf("nextAffinity(%d, %d) = %d, want %d", c.prev, c.proposed, got, c.want)
		}
	}
}

func TestUserID(t *testing.T) {
	for name, want := range map[string]string{
		"Ann": "ann", "  Mary Jane ": "mary-jane", "Zoë!!": "zo", "!!!": "", "R2-D2": "r2-d2", strings.Repeat("a", 60): strings.Repeat("a", 40),
	} {
		if got := userID(name); got != want {
			t.Errorf("userID(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestCharacterReplyValidate(t *testing.T) {
	ok := CharacterReply{Dialogue: "Hi", Emotion: "happy", Scene: "park", AffinityLevel: 50}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []CharacterReply{
		{Dialogue: "", Emotion: "happy", Scene: "park"},
		{Dialogue: "Hi", Emotion: "bored", Scene: "park"},
		{Dialogue: "Hi", Emotion: "happy", Scene: "moon"},
		{Dialogue: "Hi", Emotion: "happy", Scene: "park", AffinityLevel: 101},
	} {
		if bad.Validate() == nil {
			t.Errorf("%+v passed validation", bad)
		}
	}
}

// hana is the offline demo's script (demoReply) as a responder of the
// test fakes, so that the tests play the same Hana through the Gemini and
// the OpenAI-compatible wire formats.
func hana(c modeltest.Call) modeltest.Reply {
	r, err := demoReply(c)
	if err != nil {
		return modeltest.Reply{Status: http.StatusBadRequest}
	}
	return r
}

// site is the app on an embedded kioku, as the offline demo runs it: the
// character is the demo's Hana behind a fake model endpoint (Gemini or
// OpenAI-compatible), and kioku's memory calls go to its offline
// extractor.
type site struct {
	t     *testing.T
	url   string
	http  *http.Client
	kioku *client.Client
	fake  interface{ Calls() []modeltest.Call }
}

// startApp runs the companion with args until the test ends (when it must
// stop without an error) and returns its URL once it listens, and its log.
func startApp(t *testing.T, args ...string) (string, *bytes.Buffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	urls, done := make(chan string, 1), make(chan error, 1)
	stderr := new(bytes.Buffer)
	go func() {
		done <- run(ctx, args, stderr, func(u string) { urls <- u })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the app ended with %v", err)
		}
	})
	select {
	case url := <-urls:
		return url, stderr
	case err := <-done:
		done <- err // for the cleanup, which waits for it
		t.Fatalf("the app did not start: %v\n%s", err, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("the app did not start in 30s\n%s", stderr.String())
	}
	return "", nil
}

func newSite(t *testing.T) *site { return newSiteOn(t, "gemini") }

// newSiteOn is newSite with the model of a provider: "gemini" or "openai"
// (an OpenAI-compatible server, faked too).
func newSiteOn(t *testing.T, provider string) *site {
	return newSiteWith(t, provider, hana, nil)
}

// newSiteWith is newSiteOn with the fakes' responder, and configure, when
// set, called on the app before it serves.
func newSiteWith(t *testing.T, provider string, respond func(modeltest.Call) modeltest.Reply, configure func(*App)) *site {
	var (
		fake interface{ Calls() []modeltest.Call }
		cfg  model.Config
	)
	switch provider {
	case "gemini":
		g := modeltest.NewGemini(t)
		g.SetResponder(respond)
		fake, cfg = g, model.Config{Provider: "gemini", GeminiAPIKey: "test-key", GeminiBaseURL: g.URL, Retry: modeltest.FastRetry}
	case "openai":
		o := modeltest.NewOpenAI(t)
		o.SetResponder(respond)
		oc := o.Config()
		fake, cfg = o, model.Config{Provider: "openai", Model: "llama-test", OpenAIBaseURL: oc.BaseURL, OpenAIAPIKey: oc.APIKey, Retry: modeltest.FastRetry}
	}
	_, url := nodetest.Serve(t, node.Config{Models: demoKiokuModels(cfg), Logger: discard})
	kioku := client.New(url)
	chat, err := cfg.Chat(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	app, err := NewApp(t.Context(), kioku, chat, discard)
	if err != nil {
		t.Fatal(err)
	}
	if configure != nil {
		configure(app)
	}
	srv := httptest.NewServer(app.Handler())
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	return &site{t: t, url: srv.URL, http: &http.Client{Jar: jar}, kioku: kioku, fake: fake}
}

// call sends a JSON request and decodes the answer into out; it returns
// the status.
func (s *site) call(method, path string, in, out any) int {
	s.t.Helper()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.url+path, body)
	resp, err := s.http.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			s.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
		}
	}
	return resp.StatusCode
}

func (s *site) turn(path string, in any) turnResult {
	s.t.Helper()
	var res turnResult
	if code := s.call("POST", path, in, &res); code != http.StatusOK {
		s.t.Fatalf("%s: status %d", path, code)
	}
	return res
}

func TestConversationAcrossDays(t *testing.T) {
	s := newSite(t)
	var e struct{ Error string }
	if code := s.call("GET", "/api/me", nil, &e); code != http.StatusUnauthorized {
		t.Fatalf("before sign-in: %d", code)
	}
	if code := s.call("POST", "/api/signin", map[string]string{"name": "!!!"}, &e); code != http.StatusBadRequest || !strings.Contains(e.Error, "name") {
		t.Fatalf("bad name: %d %q", code, e.Error)
	}
	if code := s.call("POST", "/api/signin", map[string]string{"name": "Ann Lee"}, nil); code != http.StatusOK {
		t.Fatalf("sign-in: %d", code)
	}
	var v view
	s.call("GET", "/api/me", nil, &v)
	if v.User != "ann-lee" || v.Nickname != "Ann Lee" || v.Affinity != 50 || v.Session != "" {
		t.Fatalf("first view %+v", v)
	}
	if code := s.call("POST", "/api/chat", map[string]string{"message": "hi"}, &e); code != http.StatusConflict {
		t.Fatalf("chat before a day: %d", code)
	}

	// Day 1: the greeting.
	day1 := s.turn("/api/day", map[string]string{"local_time": "Mon 09:30"})
	if day1.Reply.Emotion != "shy" || day1.AffinityBefore != 50 || day1.AffinityAfter != 53 || day1.View.Day != 1 {
		t.Fatalf("greeting %+v", day1)
	}
	if st := day1.View.State["session"].(map[string]any); st["user_id"] != "ann-lee" {
		t.Fatalf("session state %v has no user id", st)
	}
	// temp: reached the model and the turn, and was never stored.
	if day1.Temp["temp:local_time"] != "Mon 09:30" || !strings.Contains(s.fake.Calls()[0].System, "Their local time: Mon 09:30") {
		t.Fatalf("temp %v; system %q", day1.Temp, s.fake.Calls()[0].System)
	}
	sess, err := s.kioku.GetSession(t.Context(), &kiokuv1.GetSessionRequest{Name: day1.View.Session})
	if err != nil {
		t.Fatal(err)
	}
	for k := range sess.GetState().AsMap() {
		if strings.HasPrefix(k, "temp:") {
			t.Fatalf("stored state has %s", k)
		}
	}
	if len(day1.View.Messages) != 1 || day1.View.Messages[0].Role != "hana" {
		t.Fatalf("the stage direction shows as a message: %+v", day1.View.Messages)
	}

	// A fact worth remembering: saved by the model's tool call; affinity
	// proposed +25 moves +10.
	t1 := s.turn("/api/chat", map[string]string{"message": "I have a cat called Miso", "local_time": "Mon 09:31"})
	if t1.Reply.Emotion != "excited" || t1.AffinityBefore != 53 || t1.AffinityAfter != 63 {
		t.Fatalf("turn 1 %+v", t1)
	}
	if len(t1.Saved) != 1 || t1.Saved[0] != "The user has a cat called Miso." {
		t.Fatalf("saved %v", t1.Saved)
	}
	// The nickname tool writes user: state.
	t2 := s.turn("/api/chat", map[string]string{"message": "please call me Aki"})
	if t2.View.Nickname != "Aki" || t2.View.State["user"].(map[string]any)["user:nickname"] != "Aki" {
		t.Fatalf("nickname after set_nickname: %+v", t2.View)
	}
	if len(t2.Temp) != 0 {
		t.Fatalf("a turn without local time has temp state %v", t2.Temp)
	}
	t3 := s.turn("/api/chat", map[string]string{"message": "you are boring"})
	if t3.Reply.Emotion != "angry" || t3.AffinityAfter != t3.AffinityBefore-4 {
		t.Fatalf("turn 3 %+v", t3)
	}
	if code := s.call("POST", "/api/chat", map[string]string{"message": "  "}, &e); code != http.StatusBadRequest || !strings.Contains(e.Error, "message") {
		t.Fatalf("empty message: %d %q", code, e.Error)
	}

	// The memory panel: the fact, its revision and the day it came from.
	var mem struct{ Memories []memoryView }
	s.call("GET", "/api/memories", nil, &mem)
	if len(mem.Memories) != 1 {
		t.Fatalf("memories %+v", mem)
	}
	m := mem.Memories[0]
	if m.Fact != "The user has a cat called Miso." || len(m.Revisions) != 1 || m.Revisions[0].Action != "created" ||
		len(m.Sources) != 1 || m.Sources[0].Label != "Day 1" || m.Sources[0].Session != day1.View.Session {
		t.Fatalf("memory %+v", m)
	}

	// Day 2: a new session; the greeting draws on the memory; user: state
	// carried over, session state did not.
	day2 := s.turn("/api/day", map[string]string{})
	if day2.View.Session == day1.View.Session || day2.View.Day != 2 {
		t.Fatalf("day 2 %+v", day2.View)
	}
	if !strings.Contains(day2.Reply.Dialogue, "I remember that you have a cat called Miso.") {
		t.Fatalf("day 2 greeting %q", day2.Reply.Dialogue)
	}
	if day2.View.Nickname != "Aki" || day2.AffinityBefore != t3.AffinityAfter {
		t.Fatalf("user state did not carry over: %+v", day2)
	}
	if len(day2.View.Messages) != 1 {
		t.Fatalf("day 2 shows %d messages", len(day2.View.Messages))
	}
	if day2.View.State["app"].(map[string]any)["app:greeting"] != defaultGreeting {
		t.Fatalf("app state %v", day2.View.State["app"])
	}

	// Another user sees none of it.
	s.http.Jar, _ = cookiejar.New(nil)
	s.call("POST", "/api/signin", map[string]string{"name": "Bob"}, nil)
	s.call("GET", "/api/memories", nil, &mem)
	s.call("GET", "/api/me", nil, &v)
	if len(mem.Memories) != 0 || v.Session != "" || v.Affinity != 50 {
		t.Fatalf("bob sees %d memories, session %q, affinity %d", len(mem.Memories), v.Session, v.Affinity)
	}
}

func TestNoModelConfigured(t *testing.T) {
	t.Setenv("COMPANION_MODEL_PROVIDER", "")
	var out bytes.Buffer
	err := run(context.Background(), []string{"--addr", "127.0.0.1:0"}, &out, nil)
	if err == nil || !strings.Contains(err.Error(), "--model-provider") || !strings.Contains(err.Error(), "COMPANION_MODEL_PROVIDER") || !strings.Contains(err.Error(), "GEMINI_API_KEY") {
		t.Fatalf("without a model: %v", err)
	}
}

// TestRunWithKiokuURL runs the binary's entry point against a kioku server
// given by --kioku, with the model chosen by COMPANION_ variables.
func TestRunWithKiokuURL(t *testing.T) {
	fake := modeltest.NewGemini(t)
	fake.SetResponder(hana)
	_, kiokuURL := nodetest.Serve(t, node.Config{Logger: discard})
	t.Setenv("GEMINI_API_KEY", "test-key")
	t.Setenv("COMPANION_MODEL_PROVIDER", "gemini")
	t.Setenv("COMPANION_GEMINI_BASE_URL", fake.URL)

	url, stderr := startApp(t, "--addr", "127.0.0.1:0", "--kioku", kiokuURL, "--log-level", "warn")
	if strings.Contains(stderr.String(), "embedded kioku") {
		t.Fatalf("started an embedded kioku despite --kioku: %s", stderr.String())
	}
	jar, _ := cookiejar.New(nil)
	s := &site{t: t, url: url, http: &http.Client{Jar: jar}, kioku: client.New(kiokuURL), fake: fake}
	var info struct {
		Model string
		Demo  bool
	}
	if s.call("GET", "/api/info", nil, &info); info.Demo || info.Model != "gemini:gemini-2.5-flash" {
		t.Fatalf("/api/info with a Gemini model: %+v", info)
	}
	s.call("POST", "/api/signin", map[string]string{"name": "Ann"}, nil)
	day := s.turn("/api/day", map[string]string{})
	// The session is on the given server.
	if _, err := s.kioku.GetSession(t.Context(), &kiokuv1.GetSessionRequest{Name: day.View.Session}); err != nil {
		t.Fatalf("the day's session is not on --kioku's server: %v", err)
	}
}

// TestOpenAICompatibleModel runs a day on an OpenAI-compatible model: tool
// calls (save_to_memory, final_answer) through chat completions.
func TestOpenAICompatibleModel(t *testing.T) {
	s := newSiteOn(t, "openai")
	s.call("POST", "/api/signin", map[string]string{"name": "Ann"}, nil)
	s.turn("/api/day", map[string]string{})
	res := s.turn("/api/chat", map[string]string{"message": "I have a cat called Miso"})
	if res.Reply.Emotion != "excited" || len(res.Saved) != 1 || res.AffinityAfter != res.AffinityBefore+10 {
		t.Fatalf("turn %+v", res)
	}
	var mem struct{ Memories []memoryView }
	s.call("GET", "/api/memories", nil, &mem)
	if len(mem.Memories) != 1 || mem.Memories[0].Fact != "The user has a cat called Miso." {
		t.Fatalf("memories %+v", mem)
	}
	if calls := s.fake.Calls(); len(calls) < 3 || len(calls[0].Tools) == 0 {
		t.Fatalf("the OpenAI-compatible server saw %d calls", len(calls))
	}
}

// TestDemoMemoryByOfflineExtractor: the demo's kioku answers its memory
// calls with its offline extractor, never with Hana's model. A fact Hana
// saves again on a later day meets the memory that holds it and is
// skipped; generating from a session extracts what the user said about
// themselves.
func TestDemoMemoryByOfflineExtractor(t *testing.T) {
	s := newSite(t)
	s.call("POST", "/api/signin", map[string]string{"name": "Ann"}, nil)
	s.turn("/api/day", map[string]string{})
	s.turn("/api/chat", map[string]string{"message": "I have a cat called Miso"})
	s.turn("/api/day", map[string]string{})
	again := s.turn("/api/chat", map[string]string{"message": "I have a cat called Miso."})
	if len(again.Saved) != 1 {
		t.Fatalf("day 2 saved %v", again.Saved)
	}
	var mem struct{ Memories []memoryView }
	s.call("GET", "/api/memories", nil, &mem)
	if len(mem.Memories) != 1 || len(mem.Memories[0].Sources) != 2 || mem.Memories[0].Fact != "The user has a cat called Miso." {
		t.Fatalf("the same fact on two days gave memories %+v, want one, from both days", mem.Memories)
	}
	for _, c := range s.fake.Calls() {
		if len(c.Tools) == 0 {
			t.Fatalf("a call without tools (a memory call) reached Hana's model: %s", c.System)
		}
	}

	// Extraction from a session of the user's.
	ctx := t.Context()
	sess, err := s.kioku.CreateSession(ctx, &kiokuv1.CreateSessionRequest{Parent: resource.UserName(appID, "bo")})
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"Hello!", "I love green tea. Do you?"} {
		if _, err := s.kioku.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: sess.GetName(), Event: &kiokuv1.Event{Author: "user", Content: client.Text("user", text)}}); err != nil {
			t.Fatal(err)
		}
	}
	op, err := s.kioku.GenerateMemories(ctx, &kiokuv1.GenerateMemoriesRequest{Parent: resource.AppName(appID), Source: client.FromSession(sess.GetName())})
	if err != nil {
		t.Fatal(err)
	}
	done, err := s.kioku.WaitOperation(ctx, op.GetName())
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.GenerateResult(done)
	if err != nil {
		t.Fatal(err)
	}
	if g := res.GetGeneratedMemories(); len(g) != 1 || g[0].GetMemory().GetFact() != "The user loves green tea." || g[0].GetMemory().GetScope()["user_id"] != "bo" {
		t.Fatalf("generated %v, want the user's love of green tea", g)
	}
}

// TestDemoAnswersFromMemory: asked about themselves, the user gets
// Hana's answer from what her load_memory tool retrieves from kioku.
func TestDemoAnswersFromMemory(t *testing.T) {
	s := newSite(t)
	s.call("POST", "/api/signin", map[string]string{"name": "Ann"}, nil)
	s.turn("/api/day", map[string]string{})
	if res := s.turn("/api/chat", map[string]string{"message": "Where do I live?"}); res.Reply.Dialogue != "Hmm, I don't think you have told me that yet." {
		t.Fatalf("before being told: %q", res.Reply.Dialogue)
	}
	saved := s.turn("/api/chat", map[string]string{"message": "I have a dog called Pochi. I work as a nurse in Osaka. I live in Osaka."})
	if strings.Join(saved.Saved, "|") != "The user has a dog called Pochi.|The user works as a nurse in Osaka.|The user lives in Osaka." {
		t.Fatalf("saved %q", saved.Saved)
	}
	s.turn("/api/day", map[string]string{})
	for q, want := range map[string]string{
		"Where do I work?":       "I remember: you work as a nurse in Osaka.",
		"What's my dog's name?":  "I remember: you have a dog called Pochi.",
		"Where do I live again?": "I remember: you live in Osaka.",
	} {
		if res := s.turn("/api/chat", map[string]string{"message": q}); res.Reply.Dialogue != want {
			t.Errorf("%s: %q, want %q", q, res.Reply.Dialogue, want)
		}
	}
	loads := 0
	for _, c := range s.fake.Calls() {
		if strings.HasPrefix(c.Messages[len(c.Messages)-1].Text, "response load_memory") {
			loads++
		}
	}
	if loads != 4 {
		t.Errorf("%d answers came from load_memory, want 4", loads)
	}
}

// TestDemoFacts: Hana saves what kioku's offline extractor finds in the
// user's words (its cases are in package internal/facts), but nothing of
// a stage direction, and says each fact back to the user.
func TestDemoFacts(t *testing.T) {
	if got := factsOf("(stage) A new day begins and I have a cat"); got != nil {
		t.Errorf("a stage direction gave facts %q", got)
	}
	got := factsOf("I have a cat called Miso. I'm a nurse. My sister lives in Osaka; I go hiking. I love my dog")
	if len(got) != 5 {
		t.Fatalf("factsOf = %q, want 5 facts", got)
	}
	for _, f := range got {
		if you := toYou(f); strings.Contains(you, "The user") || strings.Contains(you, "their") {
			t.Errorf("toYou(%q) = %q", f, you)
		}
	}
	for fact, want := range map[string]string{
		"The user has a cat called Miso.":  "you have a cat called Miso",
		"The user studies French.":         "you study French",
		"The user goes hiking.":            "you go hiking",
		"The user's sister lives in Osaka": "your sister lives in Osaka",
		"The user loves their dog.":        "you love your dog",
	} {
		if got := toYou(fact); got != want {
			t.Errorf("toYou(%q) = %q, want %q", fact, got, want)
		}
	}
}

// TestMemoryFiles: with --memory-files, Hana is offered the memory tool
// and what she writes with it is the signed-in user's memory file in
// kioku; without it (the default) no such tool is offered.
func TestMemoryFiles(t *testing.T) {
	note := func(c modeltest.Call) modeltest.Reply {
		if len(c.Tools) > 0 && !strings.Contains(c.Text(), "response memory") && strings.Contains(c.Text(), "Miso") {
			return modeltest.Reply{Parts: []map[string]any{{"functionCall": map[string]any{"name": "memory", "args": map[string]any{
				"command": "create", "path": "/memories/pets.md", "file_text": "A cat called Miso.\n"}}}}}
		}
		return hana(c)
	}
	s := newSiteWith(t, "gemini", note, func(a *App) { a.agent.MemoryFiles = true })
	s.call("POST", "/api/signin", map[string]string{"name": "Ann"}, nil)
	s.turn("/api/day", map[string]string{})
	s.turn("/api/chat", map[string]string{"message": "I have a cat called Miso"})
	f, err := s.kioku.ListMemoryFiles(t.Context(), &kiokuv1.ListMemoryFilesRequest{Parent: resource.UserName(appID, "ann")})
	if err != nil || len(f.GetMemoryFiles()) != 1 || f.GetMemoryFiles()[0].GetPath() != "/memories/pets.md" {
		t.Fatalf("ann's memory files: %v, %v", f, err)
	}
	offered := func(c modeltest.Call) bool {
		for _, d := range c.Tools {
			if d["name"] == "memory" {
				return true
			}
		}
		return false
	}
	if calls := s.fake.Calls(); !offered(calls[0]) {
		t.Error("the memory tool is not offered with --memory-files")
	}
	plain := newSite(t)
	plain.call("POST", "/api/signin", map[string]string{"name": "Ann"}, nil)
	plain.turn("/api/day", map[string]string{})
	if offered(plain.fake.Calls()[0]) {
		t.Error("the memory tool is offered by default")
	}
}

// TestUnknownModelProvider: a provider the companion does not know is an
// error listing the ones it does, its offline demo first.
func TestUnknownModelProvider(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"--addr", "127.0.0.1:0", "--model-provider", "gemni"}, &out, nil)
	if err == nil || err.Error() != `--model-provider "gemni": use demo, gemini, vertex or openai` {
		t.Fatalf("--model-provider gemni: %v", err)
	}
}
