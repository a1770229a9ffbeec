// Package scripts_test tests scripts/deps, the test suite's installer of
// what it needs besides Go, on machines made up of a PATH: fake apt-get,
// sudo and id programs stand in for the system's, so every branch (root,
// sudo, neither, no apt) runs here without installing anything.
package scripts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// machine is a PATH of the tools scripts/deps uses plus the fakes a case
// adds.
type machine struct {
	t   *testing.T
	bin string // on PATH
	log string // what the fakes were asked to do
	env []string
}

func newMachine(t *testing.T) *machine {
	t.Helper()
	m := &machine{t: t, bin: t.TempDir(), log: filepath.Join(t.TempDir(), "calls")}
	for _, tool := range []string{"bash", "env", "readlink", "dirname", "mktemp", "tail", "sed", "rm", "cat", "chmod", "true"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatalf("%s is needed to run scripts/deps: %v", tool, err)
		}
		if err := os.Symlink(p, filepath.Join(m.bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	// Node.js 20, which the TypeScript client needs, and a Debian Python
	// with the Python client's modules.
	m.fake("node", "echo v20.19.0")
	m.fake("npm", "")
	m.fake("python3", "")
	m.fake("curl", "")
	m.env = []string{"KIOKU_DEBIAN_PYTHON=" + filepath.Join(m.bin, "python3"), "PATH=" + m.bin, "HOME=" + t.TempDir(), "TMPDIR=" + t.TempDir(), "FIRESTORE_EMULATOR_HOST=127.0.0.1:1"}
	m.uid(0)
	return m
}

// fake writes a program onto the PATH that logs its name and arguments
// and then runs body.
func (m *machine) fake(name, body string) {
	m.t.Helper()
	script := "#!" + filepath.Join(m.bin, "bash") + "\necho \"" + name + " $*\" >>" + m.log + "\n" + body + "\n"
	if err := os.WriteFile(filepath.Join(m.bin, name), []byte(script), 0o755); err != nil {
		m.t.Fatal(err)
	}
}

func (m *machine) uid(n int) {
	m.t.Helper()
	if n == 0 {
		m.fake("id", "echo 0")
	} else {
		m.fake("id", "echo 1000")
	}
}

// aptInstalling is an apt-get whose install puts a program on the PATH
// for each package in provides (package -> program, a path or a name on
// the PATH).
func (m *machine) aptInstalling(provides map[string]string) {
	body := `[ "$1" = install ] || exit 0
for p in "$@"; do case "$p" in`
	for pkg, prog := range provides {
		if !filepath.IsAbs(prog) {
			prog = filepath.Join(m.bin, prog)
		}
		body += "\n" + pkg + `) printf '#!/bin/sh\n' >` + prog + " && chmod +x " + prog + ";;"
	}
	body += "\nesac; done"
	m.fake("apt-get", body)
}

// run sources scripts/deps and calls kioku_deps.
func (m *machine) run(extraEnv ...string) (ok bool, stderr, calls string) {
	m.t.Helper()
	bash := filepath.Join(m.bin, "bash")
	cmd := exec.Command(bash, "-c", `set -euo pipefail; . ./deps; kioku_deps`)
	cmd.Env = append(append([]string{}, m.env...), extraEnv...)
	var errb strings.Builder
	cmd.Stderr = &errb
	err := cmd.Run()
	if err != nil {
		if _, exit := err.(*exec.ExitError); !exit {
			m.t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(m.log)
	return err == nil, errb.String(), string(b)
}

func TestDepsPresentInstallsNothing(t *testing.T) {
	m := newMachine(t)
	m.fake("chromium", "")
	m.aptInstalling(nil)
	ok, stderr, calls := m.run()
	if !ok || stderr != "" || strings.Contains(calls, "apt-get") {
		t.Fatalf("ok=%v stderr=%q calls=%q, want success with no output and no apt-get", ok, stderr, calls)
	}
	// CHROMIUM names a browser off the PATH.
	m = newMachine(t)
	if ok, stderr, _ := m.run("CHROMIUM=/opt/chrome/chrome"); !ok {
		t.Fatalf("with CHROMIUM set: %s", stderr)
	}
}

func TestDepsAsRootInstallsChromium(t *testing.T) {
	m := newMachine(t)
	m.aptInstalling(map[string]string{"chromium": "chromium"})
	ok, stderr, calls := m.run()
	if !ok {
		t.Fatalf("kioku_deps failed: %s", stderr)
	}
	want := "apt-get update -qq\napt-get install -y -qq --no-install-recommends chromium\n"
	if !strings.Contains(calls, want) {
		t.Fatalf("calls %q, want %q", calls, want)
	}
}

// TestDepsInstallsCurl: the docs' transcripts need curl, installed like
// the browser when it is missing.
func TestDepsInstallsCurl(t *testing.T) {
	m := newMachine(t)
	m.fake("chromium", "")
	if err := os.Remove(filepath.Join(m.bin, "curl")); err != nil {
		t.Fatal(err)
	}
	m.aptInstalling(map[string]string{"curl": "curl"})
	ok, stderr, calls := m.run()
	if !ok || !strings.Contains(calls, "apt-get install -y -qq --no-install-recommends curl\n") {
		t.Fatalf("ok=%v stderr=%q calls=%q, want curl installed", ok, stderr, calls)
	}
}

func TestDepsWithSudo(t *testing.T) {
	m := newMachine(t)
	m.uid(1000)
	m.aptInstalling(map[string]string{"chromium": "chromium"})
	// A sudo that needs no password runs the command (env first: sudo
	// would drop DEBIAN_FRONTEND otherwise).
	m.fake("sudo", `[ "$1" = -n ] && shift; exec "$@"`)
	ok, stderr, calls := m.run()
	if !ok {
		t.Fatalf("kioku_deps failed: %s", stderr)
	}
	if !strings.Contains(calls, "sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium") {
		t.Fatalf("calls %q: no install through sudo", calls)
	}
}

func TestDepsStopsWithTheCommand(t *testing.T) {
	m := newMachine(t)
	m.uid(1000)
	m.aptInstalling(map[string]string{"chromium": "chromium"})
	// sudo that wants a password cannot install unattended.
	m.fake("sudo", "exit 1")
	ok, stderr, calls := m.run()
	if ok {
		t.Fatal("kioku_deps succeeded without Chromium")
	}
	if want := "sudo apt-get update && sudo apt-get install -y --no-install-recommends chromium"; !strings.Contains(stderr, want) {
		t.Fatalf("stderr %q does not give the command %q", stderr, want)
	}
	if strings.Contains(calls, "apt-get") {
		t.Fatalf("apt-get ran: %q", calls)
	}

	// KIOKU_NO_INSTALL: told, even as root.
	m = newMachine(t)
	m.aptInstalling(map[string]string{"chromium": "chromium"})
	ok, stderr, calls = m.run("KIOKU_NO_INSTALL=1")
	if ok || !strings.Contains(stderr, "\n  apt-get update && apt-get install -y --no-install-recommends chromium\n") || strings.Contains(calls, "apt-get") {
		t.Fatalf("KIOKU_NO_INSTALL: ok=%v stderr=%q calls=%q", ok, stderr, calls)
	}

	// No apt at all.
	m = newMachine(t)
	ok, stderr, _ = m.run()
	if ok || !strings.Contains(stderr, "(no apt-get here) install: chromium") || !strings.Contains(stderr, "CHROMIUM=") {
		t.Fatalf("without apt: ok=%v stderr=%q", ok, stderr)
	}
}

func TestDepsInstalledButNotFound(t *testing.T) {
	m := newMachine(t)
	m.aptInstalling(nil) // "installs" but nothing appears on the PATH
	ok, stderr, _ := m.run()
	if ok || !strings.Contains(stderr, "installed chromium, but the tests still miss chromium") {
		t.Fatalf("ok=%v stderr=%q", ok, stderr)
	}
}

func TestDepsFirestoreEmulator(t *testing.T) {
	m := newMachine(t)
	m.fake("chromium", "")
	m.fake("apt-cache", `echo "$2:"; echo "  Candidate: (none)"`)
	// No FIRESTORE_EMULATOR_HOST, no java, no emulator jar, and the Cloud
	// SDK's repository is not configured: java is installed, the emulator
	// needs Google's repository.
	m.env = m.env[:len(m.env)-1] // drop FIRESTORE_EMULATOR_HOST
	m.env = append(m.env, "KIOKU_FIRESTORE_EMULATOR_JAR=/nonexistent/emulator.jar")
	m.aptInstalling(map[string]string{"openjdk-17-jre-headless": "java"})
	ok, stderr, calls := m.run()
	if ok {
		t.Fatal("kioku_deps succeeded without the emulator")
	}
	if !strings.Contains(calls, "apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless") {
		t.Fatalf("java was not installed: %q", calls)
	}
	for _, want := range []string{"https://packages.cloud.google.com/apt cloud-sdk main", "apt-get install -y google-cloud-cli-firestore-emulator", "FIRESTORE_EMULATOR_HOST"} {
		if !strings.Contains(stderr, want) {
			t.Fatalf("stderr %q lacks %q", stderr, want)
		}
	}

	// Where apt knows the package, it is installed.
	m.fake("apt-cache", `echo "$2:"; echo "  Candidate: 528.0.0-0"`)
	jar := filepath.Join(t.TempDir(), "emulator.jar")
	m.aptInstalling(map[string]string{"google-cloud-cli-firestore-emulator": jar})
	m.env = append(m.env, "KIOKU_FIRESTORE_EMULATOR_JAR="+jar)
	ok, stderr, calls = m.run()
	if !ok || !strings.Contains(calls, "--no-install-recommends google-cloud-cli-firestore-emulator") {
		t.Fatalf("ok=%v stderr=%q calls=%q", ok, stderr, calls)
	}
}

func TestDepsNodeIsNamed(t *testing.T) {
	m := newMachine(t)
	m.fake("chromium", "")
	m.aptInstalling(nil)
	m.fake("node", "echo v18.19.0") // Debian bookworm's
	ok, stderr, calls := m.run()
	if ok || !strings.Contains(stderr, "Node.js 20 or later with npm") || strings.Contains(calls, "apt-get install") {
		t.Fatalf("with Node.js 18: ok=%v stderr=%q calls=%q", ok, stderr, calls)
	}
}

func TestDepsPythonModules(t *testing.T) {
	m := newMachine(t)
	m.fake("chromium", "")
	m.fake("python3", "exit 1") // no grpc, protobuf, pip or venv
	m.aptInstalling(map[string]string{"python3-grpcio": "python3"})
	ok, stderr, calls := m.run()
	if !ok || !strings.Contains(calls, "--no-install-recommends python3-grpcio python3-protobuf python3-pip python3-venv python3-fastapi python3-httpx\n") {
		t.Fatalf("ok=%v stderr=%q calls=%q", ok, stderr, calls)
	}
	for _, modules := range []string{"grpc, google.protobuf, pip, ensurepip", "fastapi, httpx"} {
		if !strings.Contains(calls, "python3 -c import "+modules+"\n") {
			t.Fatalf("%s were not checked with Debian's python: %q", modules, calls)
		}
	}

	// The client's modules present, the example backend's missing: only
	// FastAPI and httpx (its TestClient's) are installed...
	const noFastAPI = `case "$2" in *fastapi*) exit 1;; esac`
	m = newMachine(t)
	m.fake("chromium", "")
	m.fake("python3", noFastAPI)
	m.aptInstalling(map[string]string{"python3-fastapi": "python3"})
	ok, stderr, calls = m.run()
	if !ok || !strings.Contains(calls, "apt-get install -y -qq --no-install-recommends python3-fastapi python3-httpx\n") {
		t.Fatalf("without FastAPI: ok=%v stderr=%q calls=%q", ok, stderr, calls)
	}
	// ...or named in the command to run.
	m = newMachine(t)
	m.uid(1000)
	m.fake("chromium", "")
	m.fake("python3", noFastAPI)
	m.aptInstalling(nil)
	ok, stderr, calls = m.run()
	if want := "sudo apt-get update && sudo apt-get install -y --no-install-recommends python3-fastapi python3-httpx\n"; ok || !strings.Contains(stderr, want) || strings.Contains(calls, "apt-get install") {
		t.Fatalf("without FastAPI or sudo: ok=%v stderr=%q calls=%q, want the command %q", ok, stderr, calls, want)
	}

	// An interpreter of one's own is not installed into: it is named.
	m = newMachine(t)
	m.fake("chromium", "")
	m.fake("mypython", "exit 1")
	m.aptInstalling(nil)
	ok, stderr, calls = m.run("KIOKU_PYTHON=" + filepath.Join(m.bin, "mypython"))
	if ok || !strings.Contains(stderr, "mypython cannot import grpc") || strings.Contains(calls, "apt-get install") {
		t.Fatalf("KIOKU_PYTHON without the modules: ok=%v stderr=%q calls=%q", ok, stderr, calls)
	}
}

func TestDepsForGenerate(t *testing.T) {
	m := newMachine(t)
	// Neither Chromium nor the emulator matter to scripts/generate.
	m.env = m.env[:len(m.env)-1]
	m.aptInstalling(map[string]string{"protobuf-compiler": "protoc", "protobuf-compiler-grpc": "grpc_python_plugin"})
	bash := filepath.Join(m.bin, "bash")
	cmd := exec.Command(bash, "-c", `set -euo pipefail; . ./deps; kioku_deps generate`)
	cmd.Env = m.env
	out, err := cmd.CombinedOutput()
	calls, _ := os.ReadFile(m.log)
	if err != nil || !strings.Contains(string(calls), "--no-install-recommends protobuf-compiler protobuf-compiler-grpc\n") || !strings.Contains(string(out), "scripts/generate") {
		t.Fatalf("err=%v out=%q calls=%q", err, out, calls)
	}
}
