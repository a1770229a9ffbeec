// Command companion is kioku's demo web app: chat with Hana, a character
// who remembers you.
//
// It shows kioku end to end. Each day is a session under
// apps/companion/users/{user}; the user id is written into the session's
// state when the session is created, and the agent takes the user of every
// tool call from there (agent.UserIDKey). Hana replies with a structured
// CharacterReply (dialogue, narration, emotion, scene, affinity_level)
// through the final_answer tool whose parameters are generated from the Go
// type. The program, not a tool, stores the affinity as user:affinity,
// moving from the previous value toward the model's proposal by at most 10
// points. user:nickname (changed by the set_nickname tool), app:greeting
// and the session's day show the stored scopes; the browser's local time is
// passed as temp:local_time, which the instruction uses and kioku never
// stores. Hana decides what to remember with save_to_memory; memories are
// preloaded into every turn; "New day" starts a new session whose greeting
// draws on them. A turn answers once the memory operations it started are
// done (at most 20 seconds), so the memory panel shows what was just saved.
// Hana's core memory shows beside it (blocks.go): the app's persona block
// and the user's human block, which kioku rewrites from a day's session
// once it has been idle for --idle (the offline demo's from the facts its
// offline extractor finds).
// With --memory-files, Hana also has the memory file tool (package agent's
// MemoryFiles): she keeps notes as files in the user's /memories directory
// in kioku (kioku files list apps/companion/users/USER shows them).
//
// Usage:
//
//	companion [flags]
//
// With --kioku URL it uses a running kioku server; without it, it runs an
// embedded kioku (SQLite under --data-dir) in-process, reachable on a
// loopback port it prints, whose memory calls go to the same model as Hana.
// A model is required: see --model-provider; --model-provider demo is the
// offline demo, a scripted Hana served as a Gemini endpoint on a loopback
// port (demo.go), so that everything but her answers runs as with a real
// model, and an embedded kioku with its offline extractor. Every
// flag can also be set with COMPANION_ and its name in upper case
// (--model-provider is COMPANION_MODEL_PROVIDER).
//
// Sign-in is by name, kept in a cookie: it is a demo, not authentication;
// anyone who types a name sees that user's conversation and memories. With
// --firebase-project (and the Firebase Auth emulator, --firebase-auth-emulator,
// and --kioku naming a kioku started with --identity), the page signs in
// anonymously with the Firebase JS SDK instead, the user is the one kioku
// accepts the page's ID token for, and the page calls kioku directly with
// that token (signin.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/kioku-ai/kioku/client"
	"github.com/kioku-ai/kioku/internal/cli"
	"github.com/kioku-ai/kioku/internal/node"
	"github.com/kioku-ai/kioku/model"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr, nil); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "companion:", err)
		}
		os.Exit(2)
	}
}

const usage = `Usage: companion [flags]

Serves the companion demo: chat with Hana, a character who remembers you,
on kioku. --model-provider demo runs it offline, with a scripted Hana
instead of a language model. Every flag can also be set with the
environment variable named after it.

Flags:
`

// run runs the app until ctx is done. ready, when set, is called with the
// app's URL once it serves.
func run(ctx context.Context, args []string, stderr io.Writer, ready func(url string)) error {
	fs := cli.NewFlagSet("companion", "COMPANION_", usage)
	fs.SetOutput(stderr)
	addr := fs.Env("addr", "127.0.0.1:8090", "address of the web app")
	kiokuURL := fs.Env("kioku", "", "URL of a running kioku server; empty: run an embedded kioku")
	kiokuKey := fs.Env("kioku-key", "", "API key for --kioku, when that server requires one (kioku key --app companion)")
	dataDir := fs.Env("data-dir", "./companion-data", "data directory of the embedded kioku")
	logLevel := fs.Env("log-level", "info", "log level: debug, info, warn or error")
	idle := fs.Env("idle", "1m", "how long a day's session is idle before kioku generates memories from it and rewrites the user's human block, when the app has no generation trigger yet (0: set none)")
	memoryFiles := fs.Env("memory-files", "false", "true: Hana also keeps notes as files in the user's /memories directory in kioku (the memory file tool)")
	fbProject := fs.Env("firebase-project", "", "Firebase project whose Authentication signs users in: the page signs in anonymously with the Firebase JS SDK and calls --kioku directly with its ID token; empty: sign-in by name")
	fbEmulator := fs.Env("firebase-auth-emulator", os.Getenv("FIREBASE_AUTH_EMULATOR_HOST"), "host:port of the Firebase Auth emulator the page signs in through (default: FIREBASE_AUTH_EMULATOR_HOST)")
	fbSDK := fs.Env("firebase-sdk", "", "directory of the firebase npm package (npm install firebase), whose browser builds firebase-app.js and firebase-auth.js the page loads, with --firebase-project")
	// Hana needs a language model (or the scripted demo): kioku's offline
	// extractor and none are not among the companion's providers.
	models := cli.RegisterModelFlags(fs, append([]model.Provider{{Name: demoProvider, Needs: "offline: a scripted Hana, no key, no network"}}, model.ChatProviders()...)...)
	if err := fs.ParseNoArgs(args); err != nil {
		return err
	}
	log, err := cli.NewLogger(*logLevel)
	if err != nil {
		return err
	}
	idleFor, err := time.ParseDuration(*idle)
	if err != nil || idleFor < 0 || idleFor > 0 && idleFor < time.Second {
		return fmt.Errorf("--idle is %q; want a duration of 1s or more, such as 1m (0: none)", *idle)
	}
	files, err := strconv.ParseBool(*memoryFiles)
	if err != nil {
		return fmt.Errorf("--memory-files is %q; want true or false", *memoryFiles)
	}
	signIn, err := newFirebaseSignIn(*fbProject, *fbEmulator, *fbSDK, *kiokuURL)
	if err != nil {
		return err
	}
	cfg, err := models.Config()
	if err != nil {
		return err
	}
	if cfg.Provider == "" {
		return fmt.Errorf(`a model is needed; choose one:
  Offline demo: --model-provider demo (a scripted Hana: no key, no network)
  Gemini API:   --model-provider gemini, with GEMINI_API_KEY set
  Vertex AI:    --model-provider vertex, with GOOGLE_CLOUD_PROJECT (and GOOGLE_CLOUD_LOCATION) and Application Default Credentials
  OpenAI-compatible (a local Ollama, vLLM, OpenAI):
                --model-provider openai --openai-base-url http://localhost:11434/v1 --model llama3.1
(kioku's offline extractor, its default, only turns conversations into memories: Hana needs one of these to talk.)
Each flag can be set in the environment instead: %s, %s, %s`,
			fs.EnvName("model-provider"), fs.EnvName("model"), fs.EnvName("openai-base-url"))
	}
	demo := cfg.Provider == demoProvider
	kiokuModels := cfg
	if demo {
		kiokuModels = demoKiokuModels(cfg)
		if cfg, err = startDemoModel(ctx, cfg); err != nil {
			return err
		}
		fmt.Fprintln(stderr, "offline demo: Hana's replies are scripted (no language model); kioku's memories come from its offline extractor")
	}
	chat, err := cfg.Chat(ctx)
	if err != nil {
		return err
	}

	base := *kiokuURL
	if base == "" {
		n, err := node.Open(ctx, node.Config{DataDir: *dataDir, Models: kiokuModels, Logger: log})
		if err != nil {
			return err
		}
		defer n.Close()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		go n.Serve(ctx, ln)
		base = "http://" + ln.Addr().String()
		fmt.Fprintf(stderr, "embedded kioku on %s (data in %s)\n", base, *dataDir)
	}
	var opts []client.Option
	if *kiokuKey != "" {
		opts = append(opts, client.WithAuthToken(*kiokuKey))
	}
	kioku := client.New(base, opts...)
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	app, err := NewApp(sctx, kioku, chat, log)
	if err == nil && idleFor > 0 {
		if err = setIdleTrigger(sctx, kioku, idleFor); err != nil {
			err = fmt.Errorf("setting the app's idle trigger in kioku: %w", err)
		}
	}
	cancel()
	if err != nil {
		return err
	}
	app.demo = demo
	app.firebase = signIn
	app.agent.MemoryFiles = files

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w (choose another address with --addr)", *addr, err)
	}
	url := "http://" + ln.Addr().String()
	fmt.Fprintf(stderr, "companion on %s (model %s, kioku %s)\n", url, chat.Name(), base)
	srv := &http.Server{Handler: app.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if ready != nil {
		ready(url)
	}
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
