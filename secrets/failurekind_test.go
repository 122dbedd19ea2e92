package secrets

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	vault "github.com/hashicorp/vault/api"
)

// vaultAnswering is a loopback HTTP server that answers every request
// with status and Vault's JSON error list errs.
func vaultAnswering(t *testing.T, status int, errs ...string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		b, _ := json.Marshal(map[string][]string{"errors": errs})
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// shortTimeout is the client timeout of the cases against slowServer,
// which answers no request: the call ends by the timeout.
func shortTimeout(cfg *vault.Config) { cfg.Timeout = 300 * time.Millisecond }

// vaultCallError is the error vaultErr makes of a real Vault client's call at
// addr, a Transit signature as custos's checkpoints ask for (one attempt,
// timeout 10 s; tweak changes the client's configuration first).
func vaultCallError(t *testing.T, addr string, tweak func(*vault.Config)) error {
	t.Helper()
	cfg := vault.DefaultConfig()
	// A timeout no handshake on a loaded machine under -race comes near
	// (300 ms did: a TLS case read as "unreachable"); the slow server's
	// cases set a short one themselves (shortTimeout).
	cfg.Address, cfg.Timeout, cfg.MaxRetries = addr, 10*time.Second, 0
	if tweak != nil {
		tweak(cfg)
	}
	c, err := vault.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken("hvs.not-a-real-token")
	const api = "transit/sign/custos-audit-signing"
	_, err = c.Logical().WriteWithContext(context.Background(), api, map[string]any{"input": "bQ=="})
	if err == nil {
		t.Fatalf("signing at %s succeeded", addr)
	}
	return vaultErr("update", api, err, "")
}

// TestFailureKindByType: the class of a refresh failure (StaleError.Kind,
// on /readyz) comes from the type of the Vault client's error, here each a
// real one from a real client call against a loopback server. It was
// read from the error's text: a Vault answer quoting an x509 or tls error
// of Vault's own (its storage backend's, a plugin's) read as custos not
// trusting Vault's certificate or failing its handshake, and any other
// error answer as an unreachable Vault. The "Vault's own x509/tls error"
// and "error answer" cases fail on the old code.
func TestFailureKindByType(t *testing.T) {
	refused := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return "http://" + addr
	}
	slow := slowServer(t)
	tlsSrv := httptest.NewTLSServer(vaultAnswering(t, 404).Config.Handler)
	defer tlsSrv.Close()
	trustTLSSrv := func(cfg *vault.Config) {
		tr := cfg.HttpClient.Transport.(*http.Transport)
		tr.TLSClientConfig = tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	}
	needsClientCert := httptest.NewUnstartedServer(http.NotFoundHandler())
	needsClientCert.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	needsClientCert.StartTLS()
	defer needsClientCert.Close()
	trustClientCertSrv := func(cfg *vault.Config) {
		tr := cfg.HttpClient.Transport.(*http.Transport)
		tr.TLSClientConfig = needsClientCert.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	}
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	notTLS := rawServer(t, "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")

	for _, c := range []struct {
		name string
		err  func() error
		want string
	}{
		{"sealed (503 Vault is sealed)", func() error {
			return vaultCallError(t, vaultAnswering(t, 503, "Vault is sealed").URL, nil)
		}, kindSealed},
		{"sealed, after the request's context (503)", func() error {
			return vaultCallError(t, vaultAnswering(t, 503, "error performing token check: Vault is sealed").URL, nil)
		}, kindSealed},
		{"503 of a standby without an active node", func() error {
			return vaultCallError(t, vaultAnswering(t, 503, "local node not active but active cluster node not found").URL, nil)
		}, kindAnswered},
		{"Vault's own x509 error (500)", func() error {
			return vaultCallError(t, vaultAnswering(t, 500, "1 error occurred:\n\t* error reading from storage: x509: certificate signed by unknown authority\n\n").URL, nil)
		}, kindAnswered},
		{"Vault's own tls error (500)", func() error {
			return vaultCallError(t, vaultAnswering(t, 500, "remote error: tls: bad certificate").URL, nil)
		}, kindAnswered},
		{"an error answer (500)", func() error {
			return vaultCallError(t, vaultAnswering(t, 500, "internal error").URL, nil)
		}, kindAnswered},
		{"wrong token (403 invalid token)", func() error {
			return vaultCallError(t, vaultAnswering(t, 403, "2 errors occurred:\n\t* permission denied\n\t* invalid token\n\n").URL, nil)
		}, kindTokenRejected},
		{"policy denies (403)", func() error {
			return vaultCallError(t, vaultAnswering(t, 403, "1 error occurred:\n\t* permission denied\n\n").URL, nil)
		}, kindDenied},
		{"no such key (404)", func() error {
			return vaultCallError(t, vaultAnswering(t, 404).URL, nil)
		}, kindMissing},
		{"connection refused", func() error { return vaultCallError(t, refused(), nil) }, kindUnreachable},
		{"no answer within the timeout", func() error { return vaultCallError(t, slow.URL, shortTimeout) }, kindUnreachable},
		{"certificate of a CA not trusted", func() error { return vaultCallError(t, tlsSrv.URL, nil) }, kindUntrusted},
		{"certificate for another host name", func() error {
			return vaultCallError(t, strings.Replace(tlsSrv.URL, "127.0.0.1", "localhost", 1), func(cfg *vault.Config) {
				trustTLSSrv(cfg)
				cfg.HttpClient.Transport.(*http.Transport).TLSClientConfig.ServerName = "vault.invalid"
			})
		}, kindUntrusted},
		{"a trusted certificate: the answer is Vault's (404)", func() error { return vaultCallError(t, tlsSrv.URL, trustTLSSrv) }, kindMissing},
		{"Vault asks for a client certificate (remote alert)", func() error {
			return vaultCallError(t, needsClientCert.URL, trustClientCertSrv)
		}, kindHandshake},
		{"plain HTTP on an https address", func() error {
			return vaultCallError(t, strings.Replace(plain.URL, "http:", "https:", 1), nil)
		}, kindHandshake},
		{"no TLS on an https address", func() error { return vaultCallError(t, "https://"+notTLS, nil) }, kindHandshake},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.err()
			if got := failureKind(err); got != c.want {
				t.Errorf("failureKind(%v) = %q, want %q", err, got, c.want)
			}
		})
	}
}

// TestVaultErrKeepsItsVocabulary: vaultErr keeps the client's error for
// failureKind only; what a caller matches is this package's vocabulary,
// as before (a Vault timeout is not the caller's context ending).
func TestVaultErrKeepsItsVocabulary(t *testing.T) {
	slow := slowServer(t)
	err := vaultCallError(t, slow.URL, shortTimeout)
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("a Vault timeout: %v, want ErrUnavailable", err)
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) {
		t.Errorf("a Vault timeout's error unwraps to the client's (%v): a caller would take it for its own context ending", err)
	}
	var re *vault.ResponseError
	if err := vaultCallError(t, vaultAnswering(t, 500, "internal error").URL, nil); errors.As(err, &re) {
		t.Errorf("an error answer unwraps to the client's *vault.ResponseError: %v", err)
	}
}

// rawServer accepts connections on loopback and answers each with reply
// (no HTTP, no TLS); it returns host:port.
func rawServer(t *testing.T, reply string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(reply))
			c.Close()
		}
	}()
	return l.Addr().String()
}

// slowServer is a loopback HTTP server that answers nothing until the
// test ends.
func slowServer(t *testing.T) *httptest.Server {
	t.Helper()
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // runs first: the handlers return, Close does not wait
	return srv
}
