package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// writeCert writes a self-signed certificate for 127.0.0.1 with the given
// serial, and returns it for the client's trust pool.
// certSeq makes every generated certificate's subject unique: node
// (OpenSSL) finds the issuer of a self-signed certificate by subject name
// among all NODE_EXTRA_CA_CERTS, and two test certificates with the same
// subject and different keys would make it pick the wrong one.
var certSeq atomic.Int64

func writeCert(t *testing.T, certFile, keyFile string, serial int64) *x509.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: fmt.Sprintf("custos-e2e-%d-%d", serial, certSeq.Add(1))},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	// Written next to the target and renamed, as a certificate manager does.
	os.WriteFile(certFile+".tmp", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyFile+".tmp", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	os.Rename(keyFile+".tmp", keyFile)
	os.Rename(certFile+".tmp", certFile)
	c, _ := x509.ParseCertificate(der)
	testCAs.AddCert(c)
	testPEMsMu.Lock()
	testPEMs = append(testPEMs, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	testPEMsMu.Unlock()
	return c
}

// TestHTTPSWithCertificateReload serves MCP over TLS 1.3, refuses TLS 1.2,
// and picks up a renewed certificate without a restart.
func TestHTTPSWithCertificateReload(t *testing.T) {
	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, d.principal("clinician"), tokens)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	c1 := writeCert(t, certFile, keyFile, 1)
	srv := serve(t, d, nil, "--dev", "--listen", loopback, "--tokens", tokens, "--tls-cert", certFile, "--tls-key", keyFile, "--log-level", "debug")
	url := srv.url
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("endpoint %s is not https", url)
	}
	client := func(trust *x509.Certificate, maxVersion uint16) *http.Client {
		pool := x509.NewCertPool()
		pool.AddCert(trust)
		return &http.Client{Transport: bearer2{tok, &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MaxVersion: maxVersion}}}}
	}
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-tls", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: client(c1, 0)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ListResources(ctx, nil); err != nil {
		t.Fatal(err)
	}
	cs.Close()
	if _, err := client(c1, tls.VersionTLS12).Get(url); err == nil {
		t.Fatal("a TLS 1.2 client connected; the default is TLS 1.3 only")
	}

	// Renew: a new certificate (serial 2) is picked up by new connections.
	time.Sleep(1100 * time.Millisecond)
	c2 := writeCert(t, certFile, keyFile, 2)
	var served int64
	for deadline := time.Now().Add(10 * time.Second); served != 2; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the renewed certificate was not served (still serial %d)", served)
		}
		conn, err := tls.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(url, "https://"), "/mcp"), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			continue
		}
		served = conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
		conn.Close()
	}
	cs2, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-tls", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: client(c2, 0)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs2.ListResources(ctx, nil); err != nil {
		t.Fatalf("list over the renewed certificate: %v", err)
	}
	cs2.Close()

	// A plain HTTP request to the TLS port is answered 400, and the failed
	// handshakes above (the TLS 1.2 client, this one, a TCP connection that
	// sends nothing, as a load balancer's health check does) are in the
	// server's log as JSON lines at debug level, like every other line: net/http
	// wrote them to stderr as plain text ("2026/12/05 18:03:00 http: TLS
	// handshake error from ...", found by probing the binary), one per
	// connection anyone opened, breaking every JSON log pipeline.
	resp, err := http.Get(strings.Replace(url, "https://", "http://", 1))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("plain HTTP to the TLS port: %d, want 400", resp.StatusCode)
	}
	if conn, err := net.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(url, "https://"), "/mcp")); err == nil {
		conn.Close()
	}
	time.Sleep(200 * time.Millisecond)
	srv.stop(t)
	handshakes := 0
	for _, line := range strings.Split(strings.TrimSpace(srv.stderr.String()), "\n") {
		var rec struct{ Level, Msg string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("a server log line is not JSON: %q", line)
			continue
		}
		if rec.Msg == "TLS handshake failed" {
			handshakes++
			if rec.Level != "DEBUG" {
				t.Errorf("a failed handshake logged at %s, want DEBUG: %q", rec.Level, line)
			}
		}
	}
	if handshakes < 2 {
		t.Errorf("%d failed handshakes logged, want the TLS 1.2 client's and the plain HTTP request's", handshakes)
	}
}

type bearer2 struct {
	token string
	next  http.RoundTripper
}

func (b bearer2) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
