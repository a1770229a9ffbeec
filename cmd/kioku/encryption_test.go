package main_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/gen/kioku/v1/kiokuv1connect"
	"github.com/kioku-ai/kioku/resource"
)

// The canary: one lower-case word, so that the search index's term for
// it is the word itself in an unencrypted store.
const canary = "zqxcanaryword"

// newKeyFile makes a master key with kioku encryption new-key.
func newKeyFile(t *testing.T, path string) string {
	t.Helper()
	bin := kiokuBinary(t)
	if out, err := exec.Command(bin, "encryption", "new-key", path).CombinedOutput(); err != nil {
		t.Fatalf("kioku encryption new-key: %v\n%s", err, out)
	}
	return path
}

// TestEncryptionHelpListsRotateFlags checks that kioku encryption -h ends
// with rotate's flags, not an empty "Flags of rotate:" heading.
func TestEncryptionHelpListsRotateFlags(t *testing.T) {
	t.Parallel()
	bin := kiokuBinary(t)
	out, err := exec.Command(bin, "encryption", "-h").CombinedOutput()
	if err != nil {
		t.Fatalf("kioku encryption -h: %v\n%s", err, out)
	}
	_, flags, ok := strings.Cut(string(out), "Flags of rotate:")
	if !ok {
		t.Fatalf("no rotate flags heading in:\n%s", out)
	}
	for _, flag := range []string{"-data-dir", "-encryption-key-file", "-new-key-file"} {
		if !strings.Contains(flags, flag) {
			t.Errorf("kioku encryption -h lists no %s under its rotate flags:\n%s", flag, flags)
		}
	}
}

// grepDir returns the files under dir that hold s (ignoring case).
func grepDir(t *testing.T, dir, s string) []string {
	t.Helper()
	var found []string
	needle := []byte(strings.ToLower(s))
	err := filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(bytes.ToLower(b), needle) {
			found = append(found, filepath.Base(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// ownerOnly checks that files kioku wrote are readable by their owner
// only (0600), whatever the umask (issue 36).
func ownerOnly(t *testing.T, paths ...string) {
	t.Helper()
	for _, path := range paths {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o600 {
			t.Errorf("%s has mode %v, want -rw-------", filepath.Base(path), got)
		}
	}
}

// failToServe runs kioku serve with args, which must exit with an error
// within 30s; it returns what it printed.
func failToServe(t *testing.T, args ...string) string {
	t.Helper()
	bin := kiokuBinary(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...).CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("kioku serve %q did not exit with an error (%v):\n%s", args, err, out)
	}
	return string(out)
}

// TestEncryptionAtRest is issue 28's test: with --encryption-key-file, a
// session with an event, a user: state value, a memory, a structured
// profile field and a memory file holding a canary (in its path too: issue
// 36) leave no trace of it anywhere in the data directory (database, log,
// shared memory), while the server runs and after it stopped; SearchEvents, RetrieveMemories and
// RetrieveProfiles still find them; a restart with the
// key reads them; a start with a wrong key, or none, is refused with an
// error naming the key file.
func TestEncryptionAtRest(t *testing.T) {
	t.Parallel()
	dataDir, keyDir := t.TempDir(), t.TempDir()
	key := newKeyFile(t, filepath.Join(keyDir, "kioku.key"))
	args := []string{"--data-dir", dataDir, "--encryption-key-file", key}
	proc := startKioku(t, args...)
	ctx := t.Context()
	sc := kiokuv1connect.NewSessionServiceClient(http.DefaultClient, proc.url)
	mc := kiokuv1connect.NewMemoryBankServiceClient(http.DefaultClient, proc.url)
	parent := "apps/vault/users/ann"
	session := parent + "/sessions/s1"
	if _, err := sc.CreateSession(ctx, connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: parent, SessionId: "s1"})); err != nil {
		t.Fatal(err)
	}
	delta, _ := structpb.NewStruct(map[string]any{"user:secret": "the word is " + canary})
	if _, err := sc.AppendEvent(ctx, connect.NewRequest(&kiokuv1.AppendEventRequest{Name: session, Event: &kiokuv1.Event{
		Author: "user", Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: "My password hint is " + canary + ", remember it."}}},
		Actions: &kiokuv1.EventActions{StateDelta: delta},
	}})); err != nil {
		t.Fatal(err)
	}
	fc := kiokuv1connect.NewMemoryFileServiceClient(http.DefaultClient, proc.url)
	// The model chooses paths: one holds the canary too.
	filePath := "/memories/" + canary + "/notes.md"
	create, _ := structpb.NewStruct(map[string]any{"command": "create", "path": filePath, "file_text": "hint: " + canary + "\n"})
	if res, err := fc.Execute(ctx, connect.NewRequest(&kiokuv1.ExecuteRequest{Parent: parent, Input: create})); err != nil || res.Msg.GetIsError() {
		t.Fatalf("creating a memory file: %v %v", err, res)
	}
	if _, err := mc.CreateMemory(ctx, connect.NewRequest(&kiokuv1.CreateMemoryRequest{Parent: "apps/vault", Memory: &kiokuv1.Memory{
		Fact: "Ann's password hint is " + canary + ".", Scope: map[string]string{"user_id": "ann"},
	}})); err != nil {
		t.Fatal(err)
	}
	// A structured profile field holding the canary: bo states it, the
	// offline extractor fills the field (generation from inline events,
	// so that ann's session and memories stay as they are).
	jsonSchema, _ := structpb.NewStruct(map[string]any{"type": "object", "properties": map[string]any{
		"password_hint": map[string]any{"type": "string", "description": "The user's password hint."}}})
	if _, err := mc.UpdateMemoryBankConfig(ctx, connect.NewRequest(&kiokuv1.UpdateMemoryBankConfigRequest{
		MemoryBankConfig: &kiokuv1.MemoryBankConfig{Name: "apps/vault/memoryBankConfig", ProfileSchemas: []*kiokuv1.ProfileSchemaConfig{{SchemaId: "user-profile", JsonSchema: jsonSchema}}},
		UpdateMask:       &fieldmaskpb.FieldMask{Paths: []string{"profile_schemas"}},
	})); err != nil {
		t.Fatal(err)
	}
	op, err := mc.GenerateMemories(ctx, connect.NewRequest(&kiokuv1.GenerateMemoriesRequest{Parent: "apps/vault", Scope: map[string]string{"user_id": "bo"},
		Source: &kiokuv1.GenerateMemoriesRequest_EventsSource{EventsSource: &kiokuv1.EventsSource{Events: []*kiokuv1.Event{{
			Author: "user", Content: &kiokuv1.Content{Role: "user", Parts: []*kiokuv1.Part{{Text: "My password hint is " + canary + "."}}},
		}}}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	done, err := kiokuv1connect.NewOperationServiceClient(http.DefaultClient, proc.url).WaitOperation(ctx,
		connect.NewRequest(&kiokuv1.WaitOperationRequest{Name: op.Msg.GetName(), Timeout: durationpb.New(30 * time.Second)}))
	if err != nil || !done.Msg.GetDone() || done.Msg.GetError() != nil {
		t.Fatalf("generating bo's profile: %v, %v", done, err)
	}

	find := func(url string) {
		t.Helper()
		sc := kiokuv1connect.NewSessionServiceClient(http.DefaultClient, url)
		mc := kiokuv1connect.NewMemoryBankServiceClient(http.DefaultClient, url)
		found, err := sc.SearchEvents(ctx, connect.NewRequest(&kiokuv1.SearchEventsRequest{Parent: parent, Query: canary}))
		if err != nil {
			t.Fatal(err)
		}
		if len(found.Msg.GetResults()) != 1 || !strings.Contains(found.Msg.GetResults()[0].GetEvent().GetContent().GetParts()[0].GetText(), canary) {
			t.Fatalf("SearchEvents(%s) = %v, want the event", canary, found.Msg.GetResults())
		}
		mem, err := mc.RetrieveMemories(ctx, connect.NewRequest(&kiokuv1.RetrieveMemoriesRequest{Parent: "apps/vault", Scope: map[string]string{"user_id": "ann"},
			Method: &kiokuv1.RetrieveMemoriesRequest_SimilaritySearch{SimilaritySearch: &kiokuv1.SimilaritySearch{Query: "password hint " + canary}}}))
		if err != nil {
			t.Fatal(err)
		}
		if got := mem.Msg.GetRetrievedMemories(); len(got) != 1 || !strings.Contains(got[0].GetMemory().GetFact(), canary) {
			t.Fatalf("RetrieveMemories = %v, want the memory", got)
		}
		for _, path := range []string{filePath, "/memories"} {
			view, _ := structpb.NewStruct(map[string]any{"command": "view", "path": path})
			res, err := kiokuv1connect.NewMemoryFileServiceClient(http.DefaultClient, url).Execute(ctx, connect.NewRequest(&kiokuv1.ExecuteRequest{Parent: parent, Input: view}))
			if err != nil || !strings.Contains(res.Msg.GetOutput(), canary) {
				t.Fatalf("viewing %s: %v %v", path, err, res)
			}
		}
		profiles, err := mc.RetrieveProfiles(ctx, connect.NewRequest(&kiokuv1.RetrieveProfilesRequest{Parent: "apps/vault", Scope: map[string]string{"user_id": "bo"}}))
		if err != nil {
			t.Fatal(err)
		}
		if got := profiles.Msg.GetProfiles()["user-profile"].GetProfile().AsMap()["password_hint"]; got != canary {
			t.Fatalf("RetrieveProfiles = %v, want password_hint %s", profiles.Msg.GetProfiles(), canary)
		}
		sess, err := sc.GetSession(ctx, connect.NewRequest(&kiokuv1.GetSessionRequest{Name: session}))
		if err != nil {
			t.Fatal(err)
		}
		if got := sess.Msg.GetState().AsMap()["user:secret"]; got != "the word is "+canary || len(sess.Msg.GetEvents()) != 1 {
			t.Fatalf("session: user:secret %v, %d events", got, len(sess.Msg.GetEvents()))
		}
	}
	find(proc.url)
	// While it runs (the log not checkpointed, perhaps) and after it
	// stopped, no file holds the canary.
	if files := grepDir(t, dataDir, canary); len(files) > 0 {
		t.Fatalf("while serving, %v hold the canary", files)
	}
	proc.cmd.Process.Signal(syscall.SIGTERM)
	if err := proc.cmd.Wait(); err != nil {
		t.Fatalf("kioku serve after SIGTERM: %v", err)
	}
	if files := grepDir(t, dataDir, canary); len(files) > 0 {
		t.Fatalf("after serving, %v hold the canary", files)
	}

	// A restart with the key reads everything and still finds it.
	proc = startKioku(t, args...)
	find(proc.url)
	proc.cmd.Process.Signal(syscall.SIGTERM)
	proc.cmd.Wait()

	// A wrong key and no key are refused, naming the key file.
	wrong := newKeyFile(t, filepath.Join(keyDir, "wrong.key"))
	if out := failToServe(t, "--data-dir", dataDir, "--encryption-key-file", wrong); !strings.Contains(out, "encryption key file "+wrong) || !strings.Contains(out, "not the key") {
		t.Fatalf("a wrong key: %s", out)
	}
	if out := failToServe(t, "--data-dir", dataDir); !strings.Contains(out, "is encrypted") || !strings.Contains(out, "--encryption-key-file") {
		t.Fatalf("no key: %s", out)
	}
	// backup copies the store encrypted, and checks the copy opens with
	// the key; export reads it with the key.
	kioku := func(args ...string) (string, error) {
		bin := kiokuBinary(t)
		out, err := exec.Command(bin, args...).CombinedOutput()
		return string(out), err
	}
	copyDir := t.TempDir()
	copyFile := filepath.Join(copyDir, "kioku.db")
	if out, err := kioku("backup", "--data-dir", dataDir, "--out", copyFile, "--encryption-key-file", key); err != nil {
		t.Fatalf("kioku backup: %v\n%s", err, out)
	}
	if files := grepDir(t, copyDir, canary); len(files) > 0 {
		t.Fatalf("the backup holds the canary")
	}
	ownerOnly(t, filepath.Join(dataDir, "kioku.db"), copyFile)
	if out, err := kioku("backup", "--data-dir", dataDir, "--out", filepath.Join(copyDir, "other.db"), "--encryption-key-file", wrong); err == nil || !strings.Contains(out, wrong) {
		t.Fatalf("kioku backup with a wrong key: %v\n%s", err, out)
	}
	archive := filepath.Join(t.TempDir(), "all.jsonl.gz")
	if out, err := kioku("export", "--data-dir", dataDir, "--out", archive, "--encryption-key-file", key); err != nil || !strings.Contains(out, "1 event, ") || !strings.Contains(out, ", 2 memory, ") {
		t.Fatalf("kioku export: %v\n%s", err, out)
	}
	ownerOnly(t, archive)

	// The way to encrypt a store: import its archive into a new data
	// directory with a key.
	imported := t.TempDir()
	if out, err := kioku("import", "--in", archive, "--data-dir", imported, "--encryption-key-file", key); err != nil {
		t.Fatalf("kioku import: %v\n%s", err, out)
	}
	if files := grepDir(t, imported, canary); len(files) > 0 {
		t.Fatalf("after an import, %v hold the canary", files)
	}
	proc = startKioku(t, "--data-dir", imported, "--encryption-key-file", key)
	find(proc.url)
	proc.cmd.Process.Signal(syscall.SIGTERM)
	proc.cmd.Wait()

	// Rotation: the new key opens the store, the old one no longer does.
	next := newKeyFile(t, filepath.Join(keyDir, "next.key"))
	if out, err := kioku("encryption", "rotate", "--data-dir", dataDir, "--encryption-key-file", key, "--new-key-file", next); err != nil || !strings.Contains(out, "re-wrapped 1 data keys") {
		t.Fatalf("kioku encryption rotate: %v\n%s", err, out)
	}
	if out := failToServe(t, "--data-dir", dataDir, "--encryption-key-file", key); !strings.Contains(out, "not the key") {
		t.Fatalf("the old key after rotation: %s", out)
	}
	proc = startKioku(t, "--data-dir", dataDir, "--encryption-key-file", next)
	find(proc.url)
	proc.cmd.Process.Signal(syscall.SIGTERM)
	proc.cmd.Wait()

	// A plain store is not opened with a key.
	plain := t.TempDir()
	proc = startKioku(t, "--data-dir", plain)
	if _, err := kiokuv1connect.NewSessionServiceClient(http.DefaultClient, proc.url).CreateSession(ctx, connect.NewRequest(&kiokuv1.CreateSessionRequest{Parent: parent})); err != nil {
		t.Fatal(err)
	}
	proc.cmd.Process.Signal(syscall.SIGTERM)
	proc.cmd.Wait()
	if out := failToServe(t, "--data-dir", plain, "--encryption-key-file", key); !strings.Contains(out, "unencrypted data") || !strings.Contains(out, key) {
		t.Fatalf("a plain store with a key: %s", out)
	}
}

// selfSigned makes a certificate for 127.0.0.1 with the given serial
// number and returns its PEM files' contents.
func selfSigned(t *testing.T, serial int64) (certPEM, keyPEM []byte, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "kioku test"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ = x509.ParseCertificate(der)
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), cert
}

// TestTLS serves HTTPS with `kioku serve --tls-cert --tls-key`: Connect and
// gRPC work over TLS, plaintext is refused, and SIGHUP puts a renewed
// certificate in force (a broken one leaves it).
func TestTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	cert1, key1, x1 := selfSigned(t, 1)
	cert2, key2, x2 := selfSigned(t, 2)
	write := func(c, k []byte) {
		if err := os.WriteFile(certFile, c, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keyFile, k, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(cert1, key1)
	proc := startKioku(t, "--data-dir", t.TempDir(), "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.HasPrefix(proc.url, "https://") {
		t.Fatalf("kioku serve with TLS listens on %s", proc.url)
	}

	roots := x509.NewCertPool()
	roots.AddCert(x1)
	roots.AddCert(x2)
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: protocols, TLSClientConfig: &tls.Config{RootCAs: roots}}}
	s, err := client.New(proc.url, client.WithHTTPClient(hc)).CreateSession(t.Context(), &kiokuv1.CreateSessionRequest{Parent: resource.UserName("demo", "ann")})
	if err != nil {
		t.Fatalf("Connect over TLS: %v", err)
	}
	if _, err := client.New(proc.url, client.WithGRPC(), client.WithHTTPClient(hc)).GetSession(t.Context(), &kiokuv1.GetSessionRequest{Name: s.GetName()}); err != nil {
		t.Fatalf("gRPC over TLS: %v", err)
	}
	plain := "http://" + strings.TrimPrefix(proc.url, "https://") + "/grpc.health.v1.Health/Check"
	if res, err := http.Post(plain, "application/json", strings.NewReader("{}")); err == nil {
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			t.Fatalf("plaintext request to the TLS port: %s", res.Status)
		}
	}

	served := func() int64 {
		conn, err := tls.Dial("tcp", strings.TrimPrefix(proc.url, "https://"), &tls.Config{RootCAs: roots})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	if got := served(); got != 1 {
		t.Fatalf("serving certificate %d, want 1", got)
	}
	write(cert2, key2)
	if err := proc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for served() != 2 {
		if time.Now().After(deadline) {
			t.Fatal("the renewed certificate was not served within 10s of SIGHUP")
		}
		time.Sleep(20 * time.Millisecond)
	}
	write([]byte("not a certificate"), key2)
	proc.cmd.Process.Signal(syscall.SIGHUP)
	time.Sleep(300 * time.Millisecond)
	if got := served(); got != 2 {
		t.Fatalf("after a broken certificate file, serving %d; want 2 still", got)
	}
}

func TestTLSFlagsGoTogether(t *testing.T) {
	t.Parallel()
	bin := kiokuBinary(t)
	out, err := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--tls-cert", "cert.pem").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--tls-cert and --tls-key go together") {
		t.Fatalf("serve with --tls-cert alone: %v\n%s", err, out)
	}
}
