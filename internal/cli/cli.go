// Package cli holds what kioku's commands share on the command line: flag
// sets whose string flags can default to environment variables, the model
// flags (the same in kioku serve, the benchmarks and the companion demo),
// the logger, and the main function of kioku and kioku-bench (Main).
package cli

import (
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kioku-ai/kioku/model"
)

// FlagSet is a flag.FlagSet whose Env flags default to environment
// variables named after them.
type FlagSet struct {
	*flag.FlagSet
	prefix string
	envs   map[string]string // the variables of EnvAs flags, by flag name
}

// NewFlagSet returns a flag set whose usage prints usage then the flags.
// envPrefix starts the environment variables of its Env flags ("KIOKU_").
func NewFlagSet(name, envPrefix, usage string) *FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	return &FlagSet{FlagSet: fs, prefix: envPrefix}
}

// EnvName returns the environment variable of a flag: the prefix and the
// flag's name in upper case with '-' as '_' (--data-dir is KIOKU_DATA_DIR),
// or the variable EnvAs gave it.
func (f *FlagSet) EnvName(flagName string) string {
	if env, ok := f.envs[flagName]; ok {
		return env
	}
	return f.prefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Env defines a string flag whose default is its environment variable when
// set; a flag on the command line wins over the variable.
func (f *FlagSet) Env(name, def, usage string) *string {
	env := f.EnvName(name)
	if v, ok := os.LookupEnv(env); ok {
		def = v
	}
	return f.String(name, def, usage+" (env "+env+")")
}

// EnvBool defines a boolean flag (given bare: --name) whose default is
// its environment variable when set (true, 1, false, 0...).
func (f *FlagSet) EnvBool(name, usage string) *bool {
	env := f.EnvName(name)
	def, _ := strconv.ParseBool(os.Getenv(env))
	return f.Bool(name, def, usage+" (env "+env+")")
}

// EnvAs is Env with an environment variable of another name than the
// flag's (--identity is KIOKU_IDENTITY_FILE).
func (f *FlagSet) EnvAs(name, env, def, usage string) *string {
	if f.envs == nil {
		f.envs = map[string]string{}
	}
	f.envs[name] = env
	if v, ok := os.LookupEnv(env); ok {
		def = v
	}
	return f.String(name, def, usage+" (env "+env+")")
}

// ParseNoArgs parses args, flags only: a positional argument is an error
// naming the command ("backup takes no arguments, got [x]").
func (f *FlagSet) ParseNoArgs(args []string) error {
	if err := f.Parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return fmt.Errorf("%s takes no arguments, got %q", f.Name(), f.Args())
	}
	return nil
}

// Require prints the usage and returns an error naming the flag when its
// value is empty ("--out is required"), and nil otherwise.
func (f *FlagSet) Require(name, value string) error {
	if value != "" {
		return nil
	}
	f.Usage()
	return fmt.Errorf("--%s is required", name)
}

// ModelFlags choose the generation model and the embedder, and bound
// their calls.
type ModelFlags struct {
	provider, model, embedder, embedModel, embedDims, openaiURL, geminiURL *string
	timeout, firstByte, connect, maxReply                                  *string
	providers                                                              []model.Provider
}

// RegisterModelFlags defines the model flags on fs. --model-provider takes
// the given providers, by default model.Providers() (a command that needs
// a language model, such as the companion, gives its own list); empty is
// the first of model.Providers(), the offline extractor.
func RegisterModelFlags(fs *FlagSet, providers ...model.Provider) *ModelFlags {
	if len(providers) == 0 {
		providers = model.Providers()
	}
	return &ModelFlags{
		providers:  providers,
		provider:   fs.Env("model-provider", "", "generation model provider: "+model.ProviderList(providers, true)),
		model:      fs.Env("model", "", "generation model (default gemini-2.5-flash for gemini and vertex; required for openai)"),
		embedder:   fs.Env("embedder", "offline", "embedder: offline (built in), gemini, vertex or openai"),
		embedModel: fs.Env("embed-model", "", "embedding model (default gemini-embedding-001; required for openai)"),
		embedDims:  fs.Env("embed-dims", "", "embedding dimensions (default 768 for gemini; required for openai)"),
		openaiURL:  fs.Env("openai-base-url", "", "OpenAI-compatible API root, e.g. http://localhost:11434/v1 (default OPENAI_BASE_URL or https://api.openai.com/v1; key from OPENAI_API_KEY)"),
		geminiURL:  fs.Env("gemini-base-url", "", "Gemini or Vertex AI endpoint override (a proxy or a regional endpoint)"),
		timeout:    fs.Env("model-timeout", model.DefaultCallLimits.Reply.String(), "longest one model call may take, its retries and the reading of its reply included; a model that hangs or trickles fails the call, and its operation is retried later"),
		firstByte:  fs.Env("model-first-byte-timeout", model.DefaultCallLimits.FirstByte.String(), "longest wait for a model's reply to begin, for each try of a call (a reply that is not streamed begins once it is written); a later one is tried again within --model-timeout"),
		connect:    fs.Env("model-connect-timeout", model.DefaultCallLimits.Connect.String(), "longest wait for a connection to the model provider (TCP and TLS)"),
		maxReply:   fs.Env("model-max-reply", "1MiB", "largest reply of a generation call a model may send; a larger one is refused unread and its operation retried later"),
	}
}

// Config returns the model configuration the flags give. A provider that
// is not one of the command's is an error listing those that are.
func (f *ModelFlags) Config() (model.Config, error) {
	if p := *f.provider; p != "" && !slices.ContainsFunc(f.providers, func(x model.Provider) bool { return x.Name == p }) {
		return model.Config{}, fmt.Errorf("--model-provider %q: use %s", p, model.ProviderList(f.providers, false))
	}
	dims, err := OptionalInt("--embed-dims", *f.embedDims)
	if err != nil {
		return model.Config{}, err
	}
	var limits model.CallLimits
	for _, d := range []struct {
		flag, value string
		to          *time.Duration
	}{{"--model-timeout", *f.timeout, &limits.Reply}, {"--model-first-byte-timeout", *f.firstByte, &limits.FirstByte}, {"--model-connect-timeout", *f.connect, &limits.Connect}} {
		if *d.to, err = time.ParseDuration(d.value); err != nil || *d.to < 100*time.Millisecond {
			return model.Config{}, fmt.Errorf("%s %q: want a duration of at least 100ms, like 2m", d.flag, d.value)
		}
	}
	if limits.MaxReplyBytes, err = Bytes("--model-max-reply", *f.maxReply); err != nil {
		return model.Config{}, err
	}
	if limits.MaxReplyBytes < 1<<10 {
		return model.Config{}, fmt.Errorf("--model-max-reply %q: want at least 1KiB", *f.maxReply)
	}
	return model.Config{
		Provider: *f.provider, Model: *f.model,
		Embedder: *f.embedder, EmbedModel: *f.embedModel, EmbedDims: dims,
		OpenAIBaseURL: *f.openaiURL, GeminiBaseURL: *f.geminiURL, Limits: limits,
	}, nil
}

// OptionalInt parses a non-negative number; empty is 0.
func OptionalInt(flag, v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s %q: want a non-negative number", flag, v)
	}
	return n, nil
}

// Bytes parses a size flag: a whole number of bytes with an optional unit,
// KiB, MiB or GiB (powers of 1024) or KB, MB or GB (powers of 1000).
func Bytes(flag, v string) (int64, error) {
	num := strings.TrimRight(v, "KMGiBb ")
	unit := strings.TrimSpace(v[len(num):])
	mult := map[string]int64{"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "KB": 1e3, "MB": 1e6, "GB": 1e9}[unit]
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n < 0 || mult == 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%s %q: want a size such as 64MiB, 500MB or 1048576", flag, v)
	}
	return n * mult, nil
}

// NewLogger returns a text logger on stderr at a level named by name.
func NewLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}
