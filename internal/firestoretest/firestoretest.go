// Package firestoretest gives tests a Firestore to talk to: the Firestore
// emulator that ships with the Google Cloud CLI.
//
// When FIRESTORE_EMULATOR_HOST is set, tests use that emulator. Otherwise
// the first test that asks starts one for the whole test binary (java and
// the emulator's jar from the Cloud SDK, found through gcloud, the
// KIOKU_FIRESTORE_EMULATOR_JAR variable, or the usual install places) on a
// free port, and it dies with the test binary. Each test gets a project id
// of its own, so tests never see each other's data, and the project's data
// is deleted when the test ends.
//
// NewProxiedClient puts a fault proxy (package faultproxy) between the
// client and the emulator, for tests of outages, resets and refusals.
//
// Where no emulator can be found or started, the test fails with a message
// saying how to get one. It never skips.
package firestoretest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/kioku-ai/kioku/internal/firestoredb"
	"github.com/kioku-ai/kioku/internal/firestoretest/faultproxy"
)

const install = `the Firestore emulator is needed: install the Google Cloud CLI with its
cloud-firestore-emulator component (gcloud components install cloud-firestore-emulator,
or the google-cloud-cli-firestore-emulator package) and Java 17, or start one yourself
(gcloud emulators firestore start --host-port=127.0.0.1:8686) and set
FIRESTORE_EMULATOR_HOST=127.0.0.1:8686`

var (
	once    sync.Once
	host    string
	startEr error
)

// Host returns the host:port of a running emulator, starting one if needed,
// and sets FIRESTORE_EMULATOR_HOST for the process.
func Host(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		if h := os.Getenv("FIRESTORE_EMULATOR_HOST"); h != "" {
			host = h
			return
		}
		host, startEr = start()
		if startEr == nil {
			os.Setenv("FIRESTORE_EMULATOR_HOST", host)
		}
	})
	if startEr != nil {
		t.Fatalf("starting the Firestore emulator: %v\n%s", startEr, install)
	}
	return host
}

// Project returns a fresh project id for one test on the emulator (started
// if needed); the project's data is deleted through the emulator's REST
// endpoint when the test ends, so a shared emulator does not grow.
func Project(t testing.TB) string {
	t.Helper()
	h := Host(t)
	var b [6]byte
	rand.Read(b[:])
	project := "test-" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		// A process the test killed may have left a transaction whose locks
		// hold the reset until the emulator times them out; cleaning up is
		// hygiene, not a result, so it gets a few seconds and a log line.
		if err := Reset(h, project); err != nil {
			t.Logf("could not reset the emulator's project %s: %v", project, err)
		}
	})
	return project
}

// NewClient returns a client on the emulator for a fresh project (see
// Project), closed when the test ends.
func NewClient(t testing.TB) (*firestore.Client, string) {
	t.Helper()
	project := Project(t)
	c, err := firestore.NewClientWithDatabase(context.Background(), project, firestore.DefaultDatabaseID)
	if err != nil {
		t.Fatalf("firestore client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c, project
}

// NewProxiedClient returns a client for a fresh project (see Project) that
// reaches the emulator through a fault proxy, connected as kioku's server
// connects to Firestore (firestoredb.Dial with a Guard, whose health probe
// reads through the client); the client and the guard close when the test
// ends.
func NewProxiedClient(t testing.TB) (*firestore.Client, *faultproxy.Proxy, *firestoredb.Guard) {
	t.Helper()
	project := Project(t)
	p := faultproxy.Start(t, Host(t))
	g := firestoredb.NewGuard(firestoredb.GuardOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	opts, err := firestoredb.Dial{Guard: g, EmulatorHost: p.Addr()}.ClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	c, err := firestore.NewClientWithDatabase(context.Background(), project, firestore.DefaultDatabaseID, opts...)
	if err != nil {
		t.Fatal(err)
	}
	g.SetProbe(firestoredb.ProbeClient(c))
	t.Cleanup(func() {
		g.Close()
		c.Close()
	})
	return c, p, g
}

// Reset deletes every document of a project's default database on the
// emulator at host.
func Reset(host, project string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	url := "http://" + host + "/emulator/v1/projects/" + project + "/databases/(default)/documents"
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("DELETE %s: %s %s", url, resp.Status, body)
	}
	return nil
}

// jar finds the emulator's jar.
func jar() (string, error) {
	const rel = "platform/cloud-firestore-emulator/cloud-firestore-emulator.jar"
	if j := os.Getenv("KIOKU_FIRESTORE_EMULATOR_JAR"); j != "" {
		return j, nil
	}
	var roots []string
	if out, err := exec.Command("gcloud", "info", "--format=value(installation.sdk_root)").Output(); err == nil {
		roots = append(roots, strings.TrimSpace(string(out)))
	}
	if g, err := exec.LookPath("gcloud"); err == nil {
		if real, err := filepath.EvalSymlinks(g); err == nil {
			roots = append(roots, filepath.Dir(filepath.Dir(real)))
		}
	}
	roots = append(roots, "/usr/lib/google-cloud-sdk", "/usr/share/google-cloud-sdk", "/opt/google-cloud-sdk", filepath.Join(os.Getenv("HOME"), "google-cloud-sdk"))
	for _, r := range roots {
		if r == "" {
			continue
		}
		if p := filepath.Join(r, rel); fileExists(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("cloud-firestore-emulator.jar not found under %v", roots)
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// start runs the emulator on a free port and waits until it serves.
func start() (string, error) {
	j, err := jar()
	if err != nil {
		return "", err
	}
	java := "java"
	if jh := os.Getenv("JAVA_HOME"); jh != "" {
		java = filepath.Join(jh, "bin", "java")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(java, "-Duser.language=en", "-cp", j,
		"com.google.cloud.datastore.emulator.firestore.CloudFirestore", "start",
		"--host=127.0.0.1", fmt.Sprintf("--port=%d", port))
	// The emulator dies with the test binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("running java: %w", err)
	}
	var logMu sync.Mutex
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			logMu.Lock()
			if log.Len() < 8<<10 {
				log.WriteString(sc.Text() + "\n")
			}
			logMu.Unlock()
		}
		io.Copy(io.Discard, out)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			logMu.Lock()
			defer logMu.Unlock()
			return "", fmt.Errorf("the emulator exited (%v):\n%s", err, log.String())
		default:
		}
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr, nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	cmd.Process.Kill()
	logMu.Lock()
	defer logMu.Unlock()
	return "", fmt.Errorf("the emulator did not answer on %s within 60s:\n%s", addr, log.String())
}
