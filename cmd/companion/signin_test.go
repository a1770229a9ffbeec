package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The sign-in with Firebase refuses flags that cannot work, naming the
// flag that is missing; without --firebase-project it is off.
func TestFirebaseSignInFlags(t *testing.T) {
	sdk := t.TempDir()
	for _, f := range firebaseFiles {
		if err := os.WriteFile(filepath.Join(sdk, f), []byte("export {};"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if s, err := newFirebaseSignIn("", "127.0.0.1:9099", sdk, "http://127.0.0.1:8080"); s != nil || err != nil {
		t.Fatalf("without a project: %v, %v; want no sign-in", s, err)
	}
	for _, c := range []struct{ emulator, sdk, kioku, want string }{
		{"", sdk, "http://127.0.0.1:8080", "--firebase-auth-emulator"},
		{"127.0.0.1:9099", sdk, "", "--kioku"},
		{"127.0.0.1:9099", "", "http://127.0.0.1:8080", "--firebase-sdk"},
		{"127.0.0.1:9099", t.TempDir(), "http://127.0.0.1:8080", "firebase-app.js"},
	} {
		if _, err := newFirebaseSignIn("demo-kioku", c.emulator, c.sdk, c.kioku); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("newFirebaseSignIn(%q, %q, %q) = %v, want an error naming %s", c.emulator, c.sdk, c.kioku, err, c.want)
		}
	}
}

// The page loads the SDK's two browser builds from the app, and
// firebase-auth.js imports firebase-app.js from the app, not from
// Google's CDN; nothing else of the directory is served.
func TestFirebaseSDKServed(t *testing.T) {
	sdk := t.TempDir()
	for name, text := range map[string]string{
		"firebase-app.js":  "export const initializeApp = 1;",
		"firebase-auth.js": `import{a as b}from"https://www.gstatic.com/firebasejs/13.2.0/firebase-app.js";`,
		"package.json":     "{}",
	} {
		if err := os.WriteFile(filepath.Join(sdk, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := newFirebaseSignIn("demo-kioku", "127.0.0.1:9099", sdk, "http://127.0.0.1:8080/")
	if err != nil {
		t.Fatal(err)
	}
	a := &App{firebase: s}
	h := a.Handler()
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get("/firebase/firebase-auth.js"); code != http.StatusOK || body != `import{a as b}from"/firebase/firebase-app.js";` {
		t.Errorf("firebase-auth.js: %d %q", code, body)
	}
	if code, body := get("/firebase/firebase-app.js"); code != http.StatusOK || !strings.Contains(body, "initializeApp") {
		t.Errorf("firebase-app.js: %d %q", code, body)
	}
	if code, _ := get("/firebase/package.json"); code != http.StatusNotFound {
		t.Errorf("package.json: %d, want 404", code)
	}
	if got := s.info()["kioku"]; got != "http://127.0.0.1:8080" {
		t.Errorf("the page's kioku URL %q", got)
	}
}
