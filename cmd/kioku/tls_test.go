package main_test

import (
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

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
)

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
	s, err := client.New(proc.url, client.WithHTTPClient(hc)).CreateSession(t.Context(), &kiokuv1.CreateSessionRequest{Parent: client.UserName("demo", "ann")})
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
	bin, err := buildKioku()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--tls-cert", "cert.pem").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--tls-cert and --tls-key go together") {
		t.Fatalf("serve with --tls-cert alone: %v\n%s", err, out)
	}
}
