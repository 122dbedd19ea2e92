package secrets_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/sha512"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/cryptosigner"

	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/secrets/vaulttest"
)

// TestFHIRClientSignerSignsES384JWS: the Transit ecdsa-p384 key, through
// go-jose's cryptosigner, yields an ES384 JWS that verifies with the public
// key Vault reports, with the server's least-privilege AppRole policy.
func TestFHIRClientSignerSignsES384JWS(t *testing.T) {
	srv := vaulttest.Start(t, vaulttest.Options{})
	ctx := context.Background()
	p, err := srv.Provision(ctx, vaulttest.ProvisionOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	v, logs := openAppRole(t, srv, p, nil)
	s, err := v.FHIRClientSigner(ctx)
	if err != nil {
		t.Fatalf("FHIRClientSigner: %v", err)
	}
	if s.KeyID() != "vault:transit/custos-fhir-client@v1" || s.AuditKeyID() != "fhir-client=transit/custos-fhir-client@1" {
		t.Fatalf("KeyID = %q, AuditKeyID = %q", s.KeyID(), s.AuditKeyID())
	}
	pub, ok := s.Public().(*ecdsa.PublicKey)
	if !ok || pub.Curve.Params().Name != "P-384" {
		t.Fatalf("public key %T, want ECDSA P-384", s.Public())
	}
	js, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES384, Key: cryptosigner.Opaque(s)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := js.Sign([]byte(`{"iss":"custos"}`))
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	compact, _ := obj.CompactSerialize()
	parsed, err := jose.ParseSigned(compact, []jose.SignatureAlgorithm{jose.ES384})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := parsed.Verify(pub); err != nil || string(out) != `{"iss":"custos"}` {
		t.Fatalf("verify: %q, %v", out, err)
	}
	// A digest of another hash is refused before Vault is asked.
	d := sha512.Sum512([]byte("x"))
	if _, err := s.Sign(nil, d[:], crypto.SHA512); err == nil {
		t.Fatal("SHA-512 digest accepted")
	}
	if strings.Contains(logs.String(), p.SecretID) {
		t.Fatal("the secret id reached the log")
	}

	// A key of the wrong type is refused with the command that fixes it.
	l := secrets.DefaultLayout
	l.FHIRClientKey = "custos-fhir-client-rsa"
	if _, err := srv.Root().Logical().WriteWithContext(ctx, l.TransitPath("keys", l.FHIRClientKey), map[string]any{"type": "rsa-2048"}); err != nil {
		t.Fatal(err)
	}
	root, err := secrets.OpenVault(ctx, secrets.VaultOptions{Address: srv.Addr, Token: srv.RootToken, Layout: l})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := root.FHIRClientSigner(ctx); err == nil || !strings.Contains(err.Error(), "type=ecdsa-p384") {
		t.Fatalf("rsa key: %v, want a refusal naming type=ecdsa-p384", err)
	}
}
