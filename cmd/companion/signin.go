package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"connectrpc.com/connect"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/resource"
)

// firebaseSignIn is the sign-in with Firebase Authentication: the page
// signs in anonymously with the Firebase JS SDK, through the Auth
// emulator, and calls kioku directly with its ID token; the app takes the
// user from a token kioku accepted.
type firebaseSignIn struct {
	// Project is the Firebase project, and Emulator the Auth emulator's
	// host:port.
	Project, Emulator string
	// SDK is the directory of the firebase npm package, whose browser
	// builds (firebase-app.js, firebase-auth.js) the page loads.
	SDK string
	// Kioku is the URL of the kioku server, as the page calls it.
	Kioku string
}

// newFirebaseSignIn checks the sign-in's flags: project empty is the
// sign-in by name.
func newFirebaseSignIn(project, emulator, sdk, kiokuURL string) (*firebaseSignIn, error) {
	if project == "" {
		return nil, nil
	}
	switch {
	case emulator == "":
		return nil, errors.New("--firebase-project needs --firebase-auth-emulator (or FIREBASE_AUTH_EMULATOR_HOST): the demo signs in through the Firebase Auth emulator only")
	case kiokuURL == "":
		return nil, errors.New("--firebase-project needs --kioku: the page calls that kioku directly with its ID token, so it must be started with --identity naming the project and --cors-origins naming this app's origin")
	case sdk == "":
		return nil, errors.New("--firebase-project needs --firebase-sdk: the directory of the firebase npm package (npm install firebase), whose firebase-app.js and firebase-auth.js the page loads")
	}
	for _, f := range firebaseFiles {
		if _, err := os.Stat(filepath.Join(sdk, f)); err != nil {
			return nil, fmt.Errorf("--firebase-sdk %s: %w (want the firebase npm package's directory)", sdk, err)
		}
	}
	return &firebaseSignIn{Project: project, Emulator: emulator, SDK: sdk, Kioku: strings.TrimRight(kiokuURL, "/")}, nil
}

// firebaseFiles are the browser builds of the Firebase JS SDK the page
// loads, from the firebase npm package.
var firebaseFiles = []string{"firebase-app.js", "firebase-auth.js"}

// firebaseAppImport is firebase-auth.js's import of firebase-app.js: an
// address on Google's CDN, which the page must not reach.
var firebaseAppImport = regexp.MustCompile(`https://www\.gstatic\.com/firebasejs/[0-9A-Za-z.\-]+/firebase-app\.js`)

// serveSDK serves the SDK's browser builds under /firebase/, with
// firebase-auth.js importing firebase-app.js from here.
func (s *firebaseSignIn) serveSDK(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	found := false
	for _, f := range firebaseFiles {
		found = found || f == name
	}
	if !found {
		http.NotFound(w, r)
		return
	}
	b, err := os.ReadFile(filepath.Join(s.SDK, name))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	w.Write(firebaseAppImport.ReplaceAll(b, []byte("/firebase/firebase-app.js")))
}

// info is what the page needs to sign in.
func (s *firebaseSignIn) info() map[string]string {
	return map[string]string{"project": s.Project, "emulator": "http://" + s.Emulator, "kioku": s.Kioku}
}

// user returns the user an ID token stands for, once kioku has accepted
// it: the app reads the user's state with the token, which kioku allows
// only for the user the token names (the app verifies nothing itself).
func (s *firebaseSignIn) user(ctx context.Context, idToken string) (string, error) {
	parts := strings.Split(idToken, ".")
	var claims struct {
		Sub string `json:"sub"`
	}
	if len(parts) != 3 {
		return "", &httpError{http.StatusBadRequest, "id_token: not a JWT"}
	}
	if b, err := base64.RawURLEncoding.DecodeString(parts[1]); err != nil || json.Unmarshal(b, &claims) != nil || claims.Sub == "" {
		return "", &httpError{http.StatusBadRequest, "id_token: its claims name no user (sub)"}
	}
	kioku := client.New(s.Kioku, client.WithAuthToken(idToken))
	if _, err := kioku.GetState(ctx, &kiokuv1.GetStateRequest{Name: resource.UserStateName(appID, claims.Sub)}); err != nil {
		var ce *connect.Error
		if errors.As(err, &ce) && (ce.Code() == connect.CodeUnauthenticated || ce.Code() == connect.CodePermissionDenied) {
			return "", &httpError{http.StatusUnauthorized, "kioku refused the ID token: " + ce.Message()}
		}
		return "", err
	}
	return claims.Sub, nil
}

// validUser reports whether a cookie's value is a user id the app signs
// in: a name's userID, or with Firebase a kioku user id (Firebase uids
// have capitals).
func (a *App) validUser(id string) bool {
	if a.firebase != nil {
		return resource.ValidateID("user", id, resource.UserIDChars) == nil
	}
	return id != "" && userID(id) == id
}
