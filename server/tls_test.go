package server_test

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
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/custos-mcp/custos/server"
)

// writeTestCert writes a self-signed P-256 certificate for 127.0.0.1 and
// its key to dir.
func writeTestCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "custos-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// handshake reports whether a client limited to version and suites
// completes a TLS handshake with a server configured by cfg.
func handshake(t *testing.T, cfg *tls.Config, version uint16, suites []uint16) error {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.(*tls.Conn).Handshake()
		c.Close()
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true,
		MinVersion: version, MaxVersion: version, CipherSuites: suites})
	if err != nil {
		return err
	}
	return c.Close()
}

// With --tls12, TLS 1.2 is accepted with forward-secret AEAD suites only
// (ECDHE with AES-GCM or ChaCha20-Poly1305): the CBC suites with HMAC-SHA1
// that Go still enables by default (ECDHE-*-AES-*-CBC-SHA) are refused.
// Found by probing the built binary with openssl s_client -tls1_2 -cipher
// ECDHE-ECDSA-AES128-SHA, which completed its handshake.
func TestTLS12AcceptsOnlyAEADSuites(t *testing.T) {
	certFile, keyFile := writeTestCert(t, t.TempDir())
	cr, err := server.NewCertReloader(certFile, keyFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg12 := cr.TLSConfig(true)
	for _, s := range []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256} {
		if err := handshake(t, cfg12, tls.VersionTLS12, []uint16{s}); err != nil {
			t.Errorf("TLS 1.2 with %s refused: %v", tls.CipherSuiteName(s), err)
		}
	}
	for _, s := range []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA} {
		if err := handshake(t, cfg12, tls.VersionTLS12, []uint16{s}); err == nil {
			t.Errorf("TLS 1.2 with %s accepted", tls.CipherSuiteName(s))
		}
	}
	if err := handshake(t, cfg12, tls.VersionTLS13, nil); err != nil {
		t.Errorf("TLS 1.3 refused with --tls12: %v", err)
	}
	if err := handshake(t, cr.TLSConfig(false), tls.VersionTLS12, nil); err == nil {
		t.Error("TLS 1.2 accepted without --tls12")
	}
}
