package secrets

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	vault "github.com/hashicorp/vault/api"
)

// FHIRClientSigner signs the SMART Backend Services client assertions of
// custos sync with the Transit ecdsa-p384 key Layout.FHIRClientKey. It is a
// crypto.Signer (for go-jose's cryptosigner): Vault signs the SHA-384
// digest (prehashed) and returns the ASN.1 signature; the private key never
// leaves Vault.
type FHIRClientSigner struct {
	client  *vault.Client
	api     string
	timeout time.Duration
	ver     int
	pub     *ecdsa.PublicKey
	kid     string
	ref     string
}

// FHIRClientSigner reads the FHIR client key's latest version and returns
// its signer. The key is not read by OpenVault: only custos sync needs it
// (docs/vault.md), so a server that does not sync needs no such key.
func (v *Vault) FHIRClientSigner(ctx context.Context) (*FHIRClientSigner, error) {
	l := v.opts.Layout
	api := l.TransitPath("keys", l.FHIRClientKey)
	cctx, cancel := context.WithTimeout(ctx, v.opts.RequestTimeout)
	defer cancel()
	s, err := v.client.Logical().ReadWithContext(cctx, api)
	if err != nil {
		return nil, vaultErr("read", api, err, "")
	}
	create := fmt.Sprintf("an administrator creates it with 'vault write -f %s type=ecdsa-p384' (docs/vault.md)", api)
	if s == nil || s.Data == nil {
		return nil, fmt.Errorf("%w: %s: not found; %s", ErrMissing, api, create)
	}
	if t, _ := s.Data["type"].(string); t != "ecdsa-p384" {
		return nil, fmt.Errorf("%w: %s: type %q, want ecdsa-p384; %s", ErrMissing, api, t, create)
	}
	if exp, _ := s.Data["exportable"].(bool); exp {
		return nil, fmt.Errorf("%w: %s: the key is exportable; custos requires a non-exportable key", ErrMissing, api)
	}
	latest, err := jsonInt(s.Data["latest_version"])
	if err != nil {
		return nil, fmt.Errorf("%w: %s: no latest_version", ErrMissing, api)
	}
	keys, _ := s.Data["keys"].(map[string]any)
	m, _ := keys[strconv.Itoa(latest)].(map[string]any)
	p, _ := m["public_key"].(string)
	block, _ := pem.Decode([]byte(p))
	if block == nil {
		return nil, fmt.Errorf("%w: %s version %d has no PEM public key", ErrMissing, api, latest)
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	ek, ok := pub.(*ecdsa.PublicKey)
	if err != nil || !ok || ek.Curve != elliptic.P384() {
		return nil, fmt.Errorf("%w: %s version %d is not an ECDSA P-384 key", ErrMissing, api, latest)
	}
	return &FHIRClientSigner{
		client: v.client, api: l.TransitPath("sign", l.FHIRClientKey), timeout: v.opts.RequestTimeout,
		ver: latest, pub: ek, kid: "vault:" + l.TransitMount + "/" + l.FHIRClientKey + "@v" + strconv.Itoa(latest),
		ref: "fhir-client=" + l.TransitMount + "/" + l.FHIRClientKey + "@" + strconv.Itoa(latest),
	}, nil
}

// KeyID names the key version: "vault:transit/custos-fhir-client@v1". It
// is the kid of the client assertions and of the JWKS entry.
func (f *FHIRClientSigner) KeyID() string { return f.kid }

// AuditKeyID names the key version in audit records' keys, in their
// "name=ref" form: "fhir-client=transit/custos-fhir-client@1".
func (f *FHIRClientSigner) AuditKeyID() string { return f.ref }

// Public returns the ECDSA P-384 public key.
func (f *FHIRClientSigner) Public() crypto.PublicKey { return f.pub }

// Sign asks Transit to sign digest (SHA-384, as opts must say) and returns
// the ASN.1 DER signature, as ecdsa.PrivateKey.Sign would.
func (f *FHIRClientSigner) Sign(_ io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	if opts == nil || opts.HashFunc() != crypto.SHA384 || len(digest) != crypto.SHA384.Size() {
		return nil, fmt.Errorf("%w: %s signs SHA-384 digests only", ErrBadConfig, f.api)
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	s, err := f.client.Logical().WriteWithContext(ctx, f.api, map[string]any{
		"input": base64.StdEncoding.EncodeToString(digest), "prehashed": true, "hash_algorithm": "sha2-384",
		"marshaling_algorithm": "asn1", "key_version": f.ver,
	})
	if err != nil {
		return nil, vaultErr("update", f.api, err, "")
	}
	sig, _ := s.Data["signature"].(string)
	rest, ok := strings.CutPrefix(sig, "vault:v"+strconv.Itoa(f.ver)+":")
	if !ok {
		return nil, fmt.Errorf("%w: %s: signature of another key version", ErrUnavailable, f.api)
	}
	der, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || !ecdsa.VerifyASN1(f.pub, digest, der) {
		return nil, fmt.Errorf("%w: %s: Vault's signature does not verify with the key's public key", ErrUnavailable, f.api)
	}
	return der, nil
}
