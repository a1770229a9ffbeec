package transport

import (
	"crypto/tls"
	"fmt"
	"sync/atomic"
	"time"
)

// Certificate is the server's TLS certificate and private key, read from
// PEM files. The files can be read again while the server runs (Reload),
// so a renewed certificate takes effect without a restart: each new
// connection gets the certificate in force when it arrives.
type Certificate struct {
	certPath, keyPath string
	cur               atomic.Pointer[tls.Certificate]
}

// LoadCertificate reads a PEM certificate chain and its private key.
func LoadCertificate(certPath, keyPath string) (*Certificate, error) {
	c := &Certificate{certPath: certPath, keyPath: keyPath}
	if err := c.Reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// Reload reads the files again and puts the new certificate in force for
// new connections; if they do not hold a valid pair, the certificate in
// force stays and the error says why.
func (c *Certificate) Reload() error {
	pair, err := tls.LoadX509KeyPair(c.certPath, c.keyPath)
	if err != nil {
		return fmt.Errorf("TLS certificate %s and key %s: %w", c.certPath, c.keyPath, err)
	}
	c.cur.Store(&pair)
	return nil
}

// NotAfter returns when the certificate in force expires.
func (c *Certificate) NotAfter() time.Time { return c.cur.Load().Leaf.NotAfter }

// DNSNames returns the DNS names the certificate in force is valid for.
func (c *Certificate) DNSNames() []string { return c.cur.Load().Leaf.DNSNames }

// tlsConfig serves the certificate in force, TLS 1.2 and up, offering
// HTTP/2 (which gRPC needs) and HTTP/1.1.
func (c *Certificate) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.cur.Load(), nil
		},
	}
}
