package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium finds the browser: $CHROMIUM, else Debian's chromium or Chrome
// on the PATH. A missing browser fails the test: scripts/test installs it.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium found: install Debian's chromium package (./scripts/test does when it can) or set CHROMIUM to the browser's path")
	return ""
}

// artifacts is where the test leaves its screenshots: $TEST_ARTIFACTS_DIR
// when set (CI keeps it), else the test's temporary directory.
func artifacts(t *testing.T) string {
	dir := os.Getenv("TEST_ARTIFACTS_DIR")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestBrowser drives the whole app in headless Chromium, in the offline
// demo mode: the real binary's run with --model-provider demo, so the
// scripted Hana answers through a Gemini endpoint and the real genai
// client. Signed out (wide and 500 px narrow), only the sign-in card and
// the demo banner show; signed in, it chats two turns and checks the
// dialogue, the emotion picture and the affinity change, sees the fact in
// the user's human block once the session has been idle, starts a new day
// and finds the remembered fact in the greeting and the memory panel,
// reloads, tells Hana where they work and asks her, and gets the answer
// from what kioku retrieves, and signs out again. Screenshots of each
// state go to $TEST_ARTIFACTS_DIR.
func TestBrowser(t *testing.T) {
	browser := chromium(t)
	t.Setenv("COMPANION_MODEL_PROVIDER", "")
	t.Setenv("GEMINI_API_KEY", "")

	url, stderr := startApp(t, "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-level", "warn", "--model-provider", "demo", "--idle", "1s")

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()

	dir := artifacts(t)
	screenshot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", path)
	}
	failed := func(what string, err error) {
		t.Helper()
		if err != nil {
			screenshot("companion-failure.png")
			t.Fatalf("%s: %v\napp log:\n%s", what, err, stderr.String())
		}
	}
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		failed(what, chromedp.Do(ctx, actions...))
	}
	// text is an element's textContent, trimmed.
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
		failed("reading "+sel, err)
		return strings.TrimSpace(s)
	}
	attr := func(sel, name string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(sel), name))
		failed("reading "+sel+" "+name, err)
		return v.Value
	}
	// shown reports whether an element takes up room on the page (it and
	// its ancestors are displayed, and it is not invisible).
	shown := func(sel string) bool {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const e = document.querySelector(`+jsString(sel)+`);
			return !!e && e.getClientRects().length > 0 && getComputedStyle(e).visibility !== "hidden"; })()`))
		failed("checking "+sel, err)
		return v
	}
	// expectShown checks what the page shows in a state.
	expectShown := func(state string, want map[string]bool) {
		t.Helper()
		for sel, w := range want {
			if got := shown(sel); got != w {
				screenshot("companion-failure.png")
				t.Fatalf("%s: %s shown = %v, want %v", state, sel, got, w)
			}
		}
	}
	signedOut := map[string]bool{"#signin": true, "#signin-name": true, "#demo-banner": true,
		"#who": false, "#new-day": false, "#sign-out": false, "#main": false, "#send": false, "#message": false}
	signedIn := map[string]bool{"#signin": false, "#demo-banner": true,
		"#who": true, "#new-day": true, "#sign-out": true, "#main": true, "#send": true, "#memories": true}
	// waitDialogue waits for Hana's reply to contain s and the page to be
	// idle again.
	waitDialogue := func(s string) {
		t.Helper()
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](
			`document.getElementById("dialogue").textContent.includes(`+jsString(s)+`) && !document.getElementById("send").disabled`,
			chromedp.WithPollingTimeout(60*time.Second)))
		failed("waiting for the dialogue "+s, err)
	}
	say := func(msg string) {
		t.Helper()
		step("sending "+msg,
			chromedp.SendKeys(chromedp.CSS("#message"), msg),
			chromedp.Click(chromedp.CSS("#send")))
	}
	// waitBanner waits for the page to have asked whether this is the demo.
	waitBanner := func() {
		t.Helper()
		step("waiting for the demo banner", chromedp.WaitVisible(chromedp.CSS("#demo-banner")))
		if got := text("#demo-banner"); !strings.Contains(got, "Offline demo") || !strings.Contains(got, "scripted") {
			t.Fatalf("demo banner %q", got)
		}
	}

	// Signed out, on a wide and a narrow screen: the sign-in card and the
	// demo banner, nothing of the signed-in page.
	for _, width := range []int64{500, 1280} {
		step("opening the page", chromedp.EmulateViewport(width, 900), chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#signin-name")))
		waitBanner()
		expectShown(fmt.Sprintf("signed out, %d px", width), signedOut)
		screenshot(fmt.Sprintf("companion-signed-out-%dpx.png", width))
	}

	// Sign in: the first day starts with Hana's greeting.
	step("signing in",
		chromedp.SendKeys(chromedp.CSS("#signin-name"), "Ann"),
		chromedp.Click(chromedp.CSS("#signin-btn")),
		chromedp.WaitVisible(chromedp.CSS("#main")))
	waitDialogue("Welcome to my little flower stall")
	expectShown("signed in", signedIn)
	if got := attr("#face", "data-emotion"); got != "shy" {
		t.Fatalf("greeting emotion picture %q, want shy", got)
	}
	if got := text("#affinity-value"); got != "53" {
		t.Fatalf("affinity after the greeting %q, want 53", got)
	}

	// Turn 1: a fact worth remembering; Hana saves it, proposes +25, and the
	// page shows the clamped +10.
	say("I have a cat called Miso")
	waitDialogue("Oh, you have a cat called Miso? I will remember that!")
	if got := attr("#face", "data-emotion"); got != "excited" {
		t.Fatalf("emotion picture %q, want excited", got)
	}
	faceSVG, err := chromedp.Run(ctx, chromedp.InnerHTML(chromedp.CSS("#face")))
	failed("reading the face", err)
	if !strings.Contains(faceSVG, "<svg") || !strings.Contains(faceSVG, "Hana looks excited") {
		t.Fatalf("the face is not an SVG picture of the emotion: %.200s", faceSVG)
	}
	if got := attr("#stage", "data-scene"); got != "park" && got != "night" {
		t.Fatalf("scene %q, want park (or night, late in the day)", got)
	}
	if v, d := text("#affinity-value"), text("#affinity-delta"); v != "63" || d != "+10" {
		t.Fatalf("affinity %q (%q), want 63 (+10)", v, d)
	}
	if got := text("#memories"); !strings.Contains(got, "The user has a cat called Miso.") || !strings.Contains(got, "learned on Day 1") {
		t.Fatalf("memory panel %q", got)
	}
	if got := text("#state-temp"); !strings.Contains(got, "temp:local_time") {
		t.Fatalf("temp state panel %q", got)
	}
	// Core memory: Hana's persona (the app's block), and once the day's
	// session has been idle for a second, the user's human block holds
	// the fact, rewritten by kioku's offline extractor from the session.
	if got := text(`#blocks li[data-label="persona"]`); !strings.Contains(got, "flower stall on Sakura Street") || !strings.Contains(got, "read-only") {
		t.Fatalf("persona block %q", got)
	}
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](
		`(document.querySelector('#blocks li[data-label="human"] .value') || {}).textContent === "The user has a cat called Miso."`,
		chromedp.WithPollingTimeout(30*time.Second)))
	failed("waiting for the human block to hold the fact", err)
	if got := text(`#blocks li[data-label="human"] .source`); !strings.Contains(got, "rewritten from Day 1") {
		t.Fatalf("human block's revision %q", got)
	}
	screenshot("companion-core-memory.png")

	// Turn 2: an unkind message.
	say("you are boring")
	waitDialogue("not very kind")
	if got := attr("#face", "data-emotion"); got != "angry" {
		t.Fatalf("emotion picture %q, want angry", got)
	}
	if v, d := text("#affinity-value"), text("#affinity-delta"); v != "59" || d != "-4" {
		t.Fatalf("affinity %q (%q), want 59 (-4)", v, d)
	}
	if got := text("#state-user"); !strings.Contains(got, "user:affinity59") || !strings.Contains(got, "user:nicknameAnn") {
		t.Fatalf("user state panel %q", got)
	}
	if got := text("#state-session"); !strings.Contains(got, "user_idann") || !strings.Contains(got, "day1") {
		t.Fatalf("session state panel %q", got)
	}
	if got := text("#log"); !strings.Contains(got, "I have a cat called Miso") || strings.Contains(got, stagePrefix) {
		t.Fatalf("conversation %q", got)
	}
	screenshot("companion-day1.png")

	// A new day: a new session, and Hana greets with what she remembers.
	step("starting a new day", chromedp.Click(chromedp.CSS("#new-day")))
	waitDialogue("I remember that you have a cat called Miso.")
	if got := text("#state-session"); !strings.Contains(got, "day2") {
		t.Fatalf("session state on day 2 %q", got)
	}
	if got := text("#log"); strings.Contains(got, "boring") {
		t.Fatalf("day 2 shows day 1's conversation: %q", got)
	}
	if got := text("#memories"); !strings.Contains(got, "The user has a cat called Miso.") {
		t.Fatalf("memory panel on day 2 %q", got)
	}
	expectShown("day 2", signedIn)
	screenshot("companion.png")

	// Reloading the page restores the day from kioku.
	step("reloading", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#main")))
	waitDialogue("I remember that you have a cat called Miso.")

	// A question answered from memory: Hana's load_memory tool retrieves
	// what kioku's offline extractor stored.
	say("I work as a nurse in Osaka.")
	waitDialogue("Oh, you work as a nurse in Osaka? I will remember that!")
	if got := text("#memories"); !strings.Contains(got, "The user works as a nurse in Osaka.") {
		t.Fatalf("memory panel after the work %q", got)
	}
	say("Where do I work?")
	waitDialogue("I remember: you work as a nurse in Osaka.")
	screenshot("companion-answer.png")

	// Signing out shows the sign-in card alone again.
	step("signing out", chromedp.Click(chromedp.CSS("#sign-out")), chromedp.WaitVisible(chromedp.CSS("#signin-name")))
	expectShown("signed out again", signedOut)
}

func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
