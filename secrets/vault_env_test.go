package secrets_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	vault "github.com/hashicorp/vault/api"

	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/secrets/vaulttest"
)

// tlsFront is srv behind a TLS reverse proxy whose certificate only
// httptest's CA signs, with that CA written to a file; the proxy closes
// with the test (a test may close it earlier, to take Vault away).
func tlsFront(t *testing.T, srv *vaulttest.Server) (*httptest.Server, string) {
	t.Helper()
	target, err := url.Parse(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewTLSServer(httputil.NewSingleHostReverseProxy(target))
	t.Cleanup(front.Close)
	return front, writeCAFile(t, front.Certificate().Raw)
}

// writeCAFile writes der as a PEM certificate file and returns its path.
func writeCAFile(t *testing.T, der []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// otherCA is a self-signed CA certificate that signed nothing Vault uses.
func otherCA(t *testing.T) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "not Vault's CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// selfSigned is a certificate for 127.0.0.1 that signs itself (httptest's
// servers all share one certificate).
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "not Vault"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
}

// TestVaultEnvironmentCannotBypassAddressOrTLS: the Vault client library
// reads the VAULT_* environment behind custos's configuration.
// VAULT_SKIP_VERIFY=true turned off the verification of Vault's TLS
// certificate, even with a CA given (--vault-ca-cert): the AppRole secret id,
// the token, the KV keys and every unwrapped data key then went to whoever
// answered. VAULT_AGENT_ADDR replaced the Vault address custos had checked
// (no credentials, no query) and named in its logs. Both are refused with an
// error naming the variable; an address custos checked is the one used.
func TestVaultEnvironmentCannotBypassAddressOrTLS(t *testing.T) {
	srv, p := provisioned(t)
	ctx := context.Background()
	// Vault behind TLS with a certificate that only httptest's CA signs.
	front, rightCA := tlsFront(t, srv)
	signer, err := srv.TokenWithPolicy(ctx, secrets.PolicySignerPolicyName, secrets.PolicySignerHCL)
	if err != nil {
		t.Fatal(err)
	}
	wrongCA := writeCAFile(t, otherCA(t))

	open := func(addr, ca string) (*secrets.Vault, error) {
		o := secrets.VaultOptions{Address: addr, Token: p.Token, RequestTimeout: 5 * time.Second}
		if ca != "" {
			o.TLS = &vault.TLSConfig{CACert: ca}
		}
		v, err := secrets.OpenVault(ctx, o)
		if v != nil {
			v.Close()
		}
		return v, err
	}
	// The control: the right CA opens, the wrong one is refused.
	if _, err := open(front.URL, rightCA); err != nil {
		t.Fatalf("Vault behind TLS with its CA: %v", err)
	}
	if _, err := open(front.URL, wrongCA); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("Vault behind TLS with another CA: %v, want a certificate error", err)
	}

	t.Run("VAULT_SKIP_VERIFY", func(t *testing.T) {
		t.Setenv("VAULT_SKIP_VERIFY", "true")
		for _, ca := range []string{wrongCA, ""} {
			_, err := open(front.URL, ca)
			if !errors.Is(err, secrets.ErrBadConfig) || !strings.Contains(err.Error(), "VAULT_SKIP_VERIFY") {
				t.Errorf("VAULT_SKIP_VERIFY=true, CA file %q: %v, want a configuration error naming VAULT_SKIP_VERIFY", ca, err)
			}
		}
		// The security team's policy signer builds its own client.
		_, err := secrets.OpenPolicySigner(ctx, secrets.VaultOptions{Address: front.URL, Token: signer, TLS: &vault.TLSConfig{CACert: wrongCA}})
		if !errors.Is(err, secrets.ErrBadConfig) || !strings.Contains(err.Error(), "VAULT_SKIP_VERIFY") {
			t.Errorf("policy signer with VAULT_SKIP_VERIFY=true: %v, want a configuration error naming VAULT_SKIP_VERIFY", err)
		}
	})
	t.Run("VAULT_SKIP_VERIFY=false", func(t *testing.T) {
		t.Setenv("VAULT_SKIP_VERIFY", "false")
		if _, err := open(front.URL, rightCA); err != nil {
			t.Errorf("VAULT_SKIP_VERIFY=false with the right CA: %v", err)
		}
	})
	t.Run("VAULT_AGENT_ADDR", func(t *testing.T) {
		// Nothing listens at the address custos is given; the agent
		// address is a working Vault.
		t.Setenv("VAULT_AGENT_ADDR", srv.Addr)
		v, err := open("http://127.0.0.1:1", "")
		if !errors.Is(err, secrets.ErrBadConfig) || !strings.Contains(err.Error(), "VAULT_AGENT_ADDR") {
			name := ""
			if v != nil {
				name = v.Name()
			}
			t.Errorf("VAULT_AGENT_ADDR set, address http://127.0.0.1:1: %v (provider %q), want a configuration error naming VAULT_AGENT_ADDR", err, name)
		}
		if err != nil && strings.Contains(err.Error(), srv.Addr) {
			t.Errorf("the error repeats VAULT_AGENT_ADDR's value (it may carry credentials): %v", err)
		}
	})
}

// TestVaultStaleKindNamesTheCause: the class of cause a staleness error
// carries (what /readyz shows) for a Vault whose certificate is no longer
// signed by the CA custos trusts, and for a sealed Vault; never its address.
func TestVaultStaleKindNamesTheCause(t *testing.T) {
	srv, p := provisioned(t)
	ctx := context.Background()
	front, ca := tlsFront(t, srv)
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	v, err := secrets.OpenVault(ctx, secrets.VaultOptions{Address: front.URL, Token: p.Token, TLS: &vault.TLSConfig{CACert: ca},
		RefreshInterval: time.Minute, MaxStaleness: 2 * time.Minute, Now: func() time.Time { return time.Unix(0, now.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	kind := func() string {
		t.Helper()
		now.Add(int64(3 * time.Minute))
		var se *secrets.StaleError
		if err := v.Check(); !errors.As(err, &se) {
			t.Fatalf("keys past the staleness limit: %v", err)
		}
		if strings.Contains(se.Kind, "127.0.0.1") {
			t.Errorf("kind names Vault's address: %q", se.Kind)
		}
		return se.Kind
	}
	// Another certificate at the same address, from a CA custos does not trust.
	addr := front.Listener.Addr().String()
	front.Close()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	other := httptest.NewUnstartedServer(front.Config.Handler) // the same proxy to Vault
	other.Listener = l
	other.TLS = &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}}
	other.StartTLS()
	defer other.Close()
	if err := v.Refresh(ctx); err == nil {
		t.Fatal("refresh through a certificate of another CA succeeded")
	}
	if k := kind(); k != "Vault's TLS certificate is not trusted" {
		t.Errorf("kind with an untrusted certificate: %q", k)
	}
	other.Close()

	v2, err := secrets.OpenVault(ctx, secrets.VaultOptions{Address: srv.Addr, Token: p.Token, RequestTimeout: 500 * time.Millisecond,
		RefreshInterval: time.Minute, MaxStaleness: 2 * time.Minute, Now: func() time.Time { return time.Unix(0, now.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()
	v = v2
	if err := srv.Root().Sys().SealWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := v.Refresh(ctx); err == nil {
		t.Fatal("refresh from a sealed Vault succeeded")
	}
	if k := kind(); k != "Vault is sealed" {
		t.Errorf("kind with a sealed Vault: %q", k)
	}
}

// TestVaultAddressNotVaultIsNamed: VAULT_ADDR naming another HTTP server
// (a wrong port, a proxy's page) answered custos's first call with 404,
// reported as 'key missing or unusable: ... not found': a key was blamed
// for an address. The first call's 404 now asks whether the address is
// Vault's (and, for AppRole, whether AppRole is enabled at its mount).
func TestVaultAddressNotVaultIsNamed(t *testing.T) {
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	dir := t.TempDir()
	role, secret := filepath.Join(dir, "role-id"), filepath.Join(dir, "secret-id")
	for _, f := range []string{role, secret} {
		if err := os.WriteFile(f, []byte("canary-"+filepath.Base(f)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range []secrets.VaultOptions{
		{Address: other.URL, Token: "hvs.canary-token"},
		{Address: other.URL, AppRole: &secrets.AppRole{RoleIDFile: role, SecretIDFile: secret}},
	} {
		_, err := secrets.OpenVault(context.Background(), o)
		if err == nil || !strings.Contains(err.Error(), "is "+other.URL+" a Vault server") || strings.Contains(err.Error(), "canary") {
			t.Errorf("OpenVault against a server that is not Vault (token %v): %v, want the address questioned", o.Token != "", err)
		}
	}
}

// TestVaultSealedDuringReloginIsNamedSealed: with AppRole, a Vault sealed
// long enough for custos's token to reach its maximum TTL makes the
// re-login fail too; the class of the cause stays "Vault is sealed" (it
// became "custos cannot log in to Vault (AppRole)", which sent the operator
// to the secret id).
func TestVaultSealedDuringReloginIsNamedSealed(t *testing.T) {
	srv := vaulttest.Start(t, vaulttest.Options{})
	ctx := context.Background()
	p, err := srv.Provision(ctx, vaulttest.ProvisionOptions{Dir: t.TempDir(), TokenTTL: 2 * time.Second, TokenMaxTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	v, err := secrets.OpenVault(ctx, secrets.VaultOptions{Address: srv.Addr,
		AppRole:         &secrets.AppRole{RoleIDFile: p.RoleIDFile, SecretIDFile: p.SecretIDFile},
		RefreshInterval: 300 * time.Millisecond, MaxStaleness: 3 * time.Second, RequestTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if err := srv.Root().Sys().SealWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for v.Check() == nil {
		if time.Now().After(deadline) {
			t.Fatal("keys still fresh 30 s into a sealed Vault")
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // past the token's end: the re-login has failed
	var se *secrets.StaleError
	if err := v.Check(); !errors.As(err, &se) || se.Kind != "Vault is sealed" || v.Logins() != 1 {
		t.Fatalf("stale keys with Vault sealed past the token's life: %v (kind %q, %d logins)", err, se.Kind, v.Logins())
	}
	if !strings.Contains(se.Cause, "cannot log in to Vault again") {
		t.Errorf("the cause does not say that custos could not log in again: %s", se.Cause)
	}
}
