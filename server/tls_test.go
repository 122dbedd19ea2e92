package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/internal/syncbuf"
	"github.com/custos-mcp/custos/server"
)

// writeTestCert writes a self-signed P-256 certificate for 127.0.0.1,
// valid from an hour ago for two hours, and its key to dir.
func writeTestCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	return writeTestCertValid(t, dir, 1, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

// writeTestCertValid writes a self-signed certificate with the given
// serial and validity window to dir/cert.pem and dir/key.pem (written
// aside and renamed over them, as a certificate manager does).
func writeTestCertValid(t *testing.T, dir string, serial int64, notBefore, notAfter time.Time) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "custos-test"},
		NotBefore: notBefore, NotAfter: notAfter,
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
	for f, b := range map[string][]byte{
		certFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyFile:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	} {
		if err := os.WriteFile(f+".tmp", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(f+".tmp", f); err != nil {
			t.Fatal(err)
		}
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

// servedSerial is the serial of the certificate a server configured by
// cfg presents.
func servedSerial(t *testing.T, cfg *tls.Config) int64 {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// A certificate outside its validity window is refused at startup with an
// error naming the date, and a renewal that writes one is logged and the
// previous certificate keeps serving; so is a renewal that removes the
// files (logged once). Found probing reload against the built binary:
// deleted files went unnoticed (nothing logged) until the next restart
// failed; reading CertReloader then showed that an expired certificate was
// loaded and served without a word, at startup or on renewal (logged as
// "TLS certificate reloaded"), every client then failing its handshake.
func TestCertReloaderRefusesCertificatesOutsideTheirValidity(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	writeTestCertValid(t, dir, 1, now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if _, err := server.NewCertReloader(certFile, keyFile, nil); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("an expired certificate at startup: %v, want an error saying it expired", err)
	}
	writeTestCertValid(t, dir, 2, now.Add(24*time.Hour), now.Add(48*time.Hour))
	if _, err := server.NewCertReloader(certFile, keyFile, nil); err == nil || !strings.Contains(err.Error(), "not valid before") {
		t.Fatalf("a not yet valid certificate at startup: %v, want an error saying so", err)
	}

	writeTestCertValid(t, dir, 3, now.Add(-time.Hour), now.Add(time.Hour))
	var logs syncbuf.Buffer
	cr, err := server.NewCertReloader(certFile, keyFile, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	cfg := cr.TLSConfig(false)
	time.Sleep(1100 * time.Millisecond) // the files are checked at most once a second
	writeTestCertValid(t, dir, 4, now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	if got := servedSerial(t, cfg); got != 3 {
		t.Fatalf("after an expired renewal: serial %d served, want the previous 3", got)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "expired") {
		t.Fatalf("the expired renewal was not logged as an error: %s", logs.String())
	}
	time.Sleep(1100 * time.Millisecond)
	os.Remove(certFile)
	for range 3 {
		if got := servedSerial(t, cfg); got != 3 {
			t.Fatalf("with the files gone: serial %d served, want the previous 3", got)
		}
		time.Sleep(1100 * time.Millisecond)
	}
	if n := strings.Count(logs.String(), "unreadable"); n != 1 {
		t.Fatalf("the missing files were logged %d times, want once: %s", n, logs.String())
	}
	writeTestCertValid(t, dir, 5, now.Add(-time.Hour), now.Add(time.Hour))
	if got := servedSerial(t, cfg); got != 5 {
		t.Fatalf("after a good renewal: serial %d served, want 5", got)
	}
}
