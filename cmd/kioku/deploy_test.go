package main

import (
	"bufio"
	"flag"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	composecli "github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/kioku-ai/kioku/internal/cli"
)

// The Dockerfile and compose.yaml are checked here against the binaries
// they run, since no container runtime runs in the tests: every KIOKU_ and
// COMPANION_ variable they set is a flag of kioku serve or the companion,
// addresses and ports agree, the image runs as a non-root user with its
// data directory in a volume it owns, and the build is a static one of
// packages that exist. .ci/run runs the Dockerfile's go build line itself,
// and with a container runtime also builds the image and validates the
// compose file.

// envNames returns the environment variables of a command's flags.
func envNames(prefix string, define func(fs *cli.FlagSet)) []string {
	fs := cli.NewFlagSet("x", prefix, "")
	define(fs)
	var out []string
	fs.VisitAll(func(f *flag.Flag) { out = append(out, fs.EnvName(f.Name)) })
	return out
}

// serveEnv are kioku serve's variables.
func serveEnv() []string {
	return envNames("KIOKU_", func(fs *cli.FlagSet) { registerServeFlags(fs) })
}

// companionEnv are the companion's variables: its own flags (read from its
// source, where run defines them) and the model flags it shares.
func companionEnv(t *testing.T) []string {
	src, err := os.ReadFile("../companion/main.go")
	if err != nil {
		t.Fatal(err)
	}
	own := regexp.MustCompile(`fs\.Env\("([a-z-]+)"`).FindAllStringSubmatch(string(src), -1)
	if len(own) < 4 {
		t.Fatalf("found %d flags in the companion's main.go; has run changed how it defines them?", len(own))
	}
	return envNames("COMPANION_", func(fs *cli.FlagSet) {
		for _, m := range own {
			fs.Env(m[1], "", "")
		}
		cli.RegisterModelFlags(fs)
	})
}

// dockerfile is the Dockerfile's instructions, by stage.
type dockerfile struct {
	stages [][]instruction
}

type instruction struct{ cmd, args string }

func readDockerfile(t *testing.T) dockerfile {
	f, err := os.Open("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var d dockerfile
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cmd, args, _ := strings.Cut(line, " ")
		in := instruction{strings.ToUpper(cmd), strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			d.stages = append(d.stages, nil)
		}
		if len(d.stages) == 0 {
			t.Fatalf("Dockerfile: %q before the first FROM", line)
		}
		d.stages[len(d.stages)-1] = append(d.stages[len(d.stages)-1], in)
	}
	return d
}

func (d dockerfile) all(stage int, cmd string) []string {
	var out []string
	for _, in := range d.stages[stage] {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

// envOf reads ENV K=V K2=V2 lines.
func envOf(lines []string) map[string]string {
	env := map[string]string{}
	for _, l := range lines {
		for _, kv := range strings.Fields(l) {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	return env
}

func portOf(t *testing.T, what, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s %q: %v", what, addr, err)
	}
	return port
}

func TestDockerfile(t *testing.T) {
	t.Parallel()
	d := readDockerfile(t)
	if len(d.stages) < 2 {
		t.Fatalf("the Dockerfile has %d stages, want a build stage and a small final one", len(d.stages))
	}
	// The build: the Go of go.mod, static binaries of the two commands.
	goMod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(goMod)
	if from := d.all(0, "FROM"); len(from) != 1 || !strings.HasPrefix(from[0], "golang:"+string(goVersion[1])) {
		t.Errorf("build stage FROM %v, want golang:%s (go.mod's go)", from, goVersion[1])
	}
	var build string
	for _, r := range d.all(0, "RUN") {
		if strings.Contains(r, "go build") {
			build = r
		}
	}
	for _, want := range []string{"CGO_ENABLED=0 go build", "-X main.releaseVersion=${VERSION}", "./cmd/kioku", "./cmd/companion", "-o /out/"} {
		if !strings.Contains(build, want) {
			t.Errorf("the Dockerfile's go build line %q lacks %q", build, want)
		}
	}
	_ = releaseVersion // the variable -X sets
	for _, dir := range []string{"../../cmd/kioku", "../../cmd/companion"} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("the Dockerfile builds %s: %v", dir, err)
		}
	}

	// The image: non-root, owning its data volume, serving on the exposed
	// port, with variables kioku serve reads.
	final := len(d.stages) - 1
	user := d.all(final, "USER")
	if len(user) != 1 || user[0] == "root" || strings.HasPrefix(user[0], "0") {
		t.Fatalf("final stage USER %v, want a non-root user", user)
	}
	uid, _, _ := strings.Cut(user[0], ":")
	env := envOf(d.all(final, "ENV"))
	for k := range env {
		if strings.HasPrefix(k, "KIOKU_") && !slices.Contains(serveEnv(), k) {
			t.Errorf("the Dockerfile sets %s, which is not a flag of kioku serve", k)
		}
	}
	if vol := d.all(final, "VOLUME"); len(vol) != 1 || vol[0] != env["KIOKU_DATA_DIR"] {
		t.Errorf("VOLUME %v, want KIOKU_DATA_DIR %q", vol, env["KIOKU_DATA_DIR"])
	}
	owned := false
	for _, c := range d.all(final, "COPY") {
		if strings.Contains(c, "--chown="+uid+":") && strings.HasSuffix(c, " "+env["KIOKU_DATA_DIR"]) {
			owned = true
		}
	}
	if !owned {
		t.Errorf("the data directory %s is not copied in owned by the user %s", env["KIOKU_DATA_DIR"], uid)
	}
	if expose := d.all(final, "EXPOSE"); len(expose) != 1 || expose[0] != portOf(t, "KIOKU_ADDR", env["KIOKU_ADDR"]) {
		t.Errorf("EXPOSE %v, want the port of KIOKU_ADDR %s", expose, env["KIOKU_ADDR"])
	}
	copied := strings.Join(d.all(final, "COPY"), " ")
	if ep := d.all(final, "ENTRYPOINT"); len(ep) != 1 || ep[0] != `["/usr/local/bin/kioku"]` || !strings.Contains(copied, "/out/kioku") || !strings.Contains(copied, "/out/companion") {
		t.Errorf("ENTRYPOINT %v with COPY %q, want kioku (and the companion) in /usr/local/bin", ep, copied)
	}
	if cmd := d.all(final, "CMD"); len(cmd) != 1 || cmd[0] != `["serve"]` {
		t.Errorf("CMD %v, want serve", cmd)
	}
}

// TestComposeFile loads compose.yaml as docker compose does (compose-go:
// the Compose specification's schema, interpolation, normalisation) and
// checks its services against the binaries and the Dockerfile.
func TestComposeFile(t *testing.T) {
	t.Parallel()
	for _, env := range []struct {
		vars     []string
		provider string
	}{{nil, "demo"}, {[]string{"COMPANION_MODEL_PROVIDER=gemini", "GEMINI_API_KEY=k"}, "gemini"}} {
		opts, err := composecli.NewProjectOptions([]string{"../../compose.yaml"}, composecli.WithEnv(env.vars), composecli.WithWorkingDirectory("../.."))
		if err != nil {
			t.Fatal(err)
		}
		p, err := opts.LoadProject(t.Context())
		if err != nil {
			t.Fatalf("compose.yaml does not load as docker compose would: %v", err)
		}
		checkCompose(t, p, env.provider)
	}
}

func value(m types.MappingWithEquals, k string) string {
	if v := m[k]; v != nil {
		return *v
	}
	return ""
}

func checkCompose(t *testing.T, p *types.Project, provider string) {
	fs, ok1 := p.Services["firestore"]
	k, ok2 := p.Services["kioku"]
	comp, ok3 := p.Services["companion"]
	if !ok1 || !ok2 || !ok3 || len(p.Services) != 3 {
		t.Fatalf("services %v, want firestore, kioku and companion", slices.Collect(maps.Keys(p.Services)))
	}
	if fs.Image == "" || k.Build == nil || k.Image == "" || comp.Image != k.Image || comp.Build != nil {
		t.Fatalf("images: firestore %q; kioku built as %q; companion %q (want kioku's image)", fs.Image, k.Image, comp.Image)
	}
	if _, err := os.Stat(filepath.Join(k.Build.Context, k.Build.Dockerfile)); err != nil {
		t.Errorf("kioku's build: %v", err)
	}

	// The emulator and kioku's way to it.
	hostPort := ""
	for _, a := range fs.Command {
		if v, ok := strings.CutPrefix(a, "--host-port="); ok {
			hostPort = v
		}
	}
	if !slices.Contains(fs.Command, "firestore") || hostPort == "" {
		t.Fatalf("the firestore service runs %v, want the Firestore emulator with --host-port", fs.Command)
	}
	if got, want := value(k.Environment, "FIRESTORE_EMULATOR_HOST"), "firestore:"+portOf(t, "--host-port", hostPort); got != want {
		t.Errorf("kioku's FIRESTORE_EMULATOR_HOST %q, want %q", got, want)
	}
	if _, ok := k.DependsOn["firestore"]; !ok {
		t.Errorf("kioku does not depend on firestore")
	}
	if _, ok := comp.DependsOn["kioku"]; !ok {
		t.Errorf("the companion does not depend on kioku")
	}

	// kioku: serve's variables, on the Firestore store, published where it
	// listens.
	if !slices.Equal(k.Command, types.ShellCommand{"serve"}) {
		t.Errorf("kioku runs %v, want serve", k.Command)
	}
	for name := range k.Environment {
		if strings.HasPrefix(name, "KIOKU_") && !slices.Contains(serveEnv(), name) {
			t.Errorf("compose sets %s for kioku, which is not a flag of kioku serve", name)
		}
	}
	if value(k.Environment, "KIOKU_STORE") != "firestore" || value(k.Environment, "KIOKU_FIRESTORE_PROJECT") == "" {
		t.Errorf("kioku's store: %q, project %q", value(k.Environment, "KIOKU_STORE"), value(k.Environment, "KIOKU_FIRESTORE_PROJECT"))
	}
	kiokuPort := portOf(t, "KIOKU_ADDR", value(k.Environment, "KIOKU_ADDR"))
	if len(k.Ports) != 1 || strconv.Itoa(int(k.Ports[0].Target)) != kiokuPort || k.Ports[0].HostIP != "127.0.0.1" {
		t.Errorf("kioku publishes %+v, want its port %s on the host's loopback", k.Ports, kiokuPort)
	}

	// The companion: its variables, kioku by service name and port.
	if !slices.Equal(comp.Entrypoint, types.ShellCommand{"/usr/local/bin/companion"}) {
		t.Errorf("the companion's entrypoint %v", comp.Entrypoint)
	}
	for name := range comp.Environment {
		if strings.HasPrefix(name, "COMPANION_") && !slices.Contains(companionEnv(t), name) {
			t.Errorf("compose sets %s for the companion, which is not one of its flags", name)
		}
	}
	u, err := url.Parse(value(comp.Environment, "COMPANION_KIOKU"))
	if err != nil || u.Hostname() != "kioku" || u.Port() != kiokuPort {
		t.Errorf("COMPANION_KIOKU %q, want http://kioku:%s", value(comp.Environment, "COMPANION_KIOKU"), kiokuPort)
	}
	if got := value(comp.Environment, "COMPANION_MODEL_PROVIDER"); got != provider {
		t.Errorf("COMPANION_MODEL_PROVIDER %q, want %q (the offline demo unless the environment chooses)", got, provider)
	}
	compPort := portOf(t, "COMPANION_ADDR", value(comp.Environment, "COMPANION_ADDR"))
	if len(comp.Ports) != 1 || strconv.Itoa(int(comp.Ports[0].Target)) != compPort || comp.Ports[0].HostIP != "127.0.0.1" {
		t.Errorf("the companion publishes %+v, want its port %s on the host's loopback", comp.Ports, compPort)
	}
}
