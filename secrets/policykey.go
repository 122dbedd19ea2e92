package secrets

import (
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"sort"
	"strconv"
	"strings"

	vault "github.com/hashicorp/vault/api"
)

// PublicKeyPEM is one version of a Transit signing key's public key, with
// the key id under which bundles signed by it name it.
type PublicKeyPEM struct {
	ID  string // "vault:transit/custos-policy-signing@v2"
	PEM []byte // PKIX "PUBLIC KEY"
}

// policyKeyID is the JWS key id of a version of the policy key.
func policyKeyID(l Layout, ver int) string {
	return "vault:" + l.TransitMount + "/" + l.PolicyKey + "@v" + strconv.Itoa(ver)
}

// readPolicyKeys reads every version's public key of the policy key and
// checks it is an ECDSA P-256 key.
func readPolicyKeys(ctx context.Context, c *vault.Client, l Layout, timeout func() (context.Context, context.CancelFunc)) ([]PublicKeyPEM, int, error) {
	api := l.TransitPath("keys", l.PolicyKey)
	cctx, cancel := timeout()
	defer cancel()
	s, err := c.Logical().ReadWithContext(cctx, api)
	if err != nil {
		return nil, 0, vaultErr("read", api, err, "")
	}
	if s == nil || s.Data == nil {
		return nil, 0, fmt.Errorf("%w: %s: not found; an administrator creates it with 'vault write -f %s type=ecdsa-p256' (docs/vault.md)", ErrMissing, api, api)
	}
	if t, _ := s.Data["type"].(string); t != "ecdsa-p256" {
		return nil, 0, fmt.Errorf("%w: %s: type %q, want ecdsa-p256", ErrMissing, api, t)
	}
	latest, err := jsonInt(s.Data["latest_version"])
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %s: no latest_version", ErrMissing, api)
	}
	keys, _ := s.Data["keys"].(map[string]any)
	var out []PublicKeyPEM
	for k, v := range keys {
		ver, err := strconv.Atoi(k)
		if err != nil {
			continue
		}
		m, _ := v.(map[string]any)
		p, _ := m["public_key"].(string)
		block, _ := pem.Decode([]byte(p))
		if block == nil {
			return nil, 0, fmt.Errorf("%w: %s version %d has no PEM public key", ErrMissing, api, ver)
		}
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if ek, ok := pub.(*ecdsa.PublicKey); err != nil || !ok || ek.Curve.Params().Name != "P-256" {
			return nil, 0, fmt.Errorf("%w: %s version %d is not an ECDSA P-256 key", ErrMissing, api, ver)
		}
		out = append(out, PublicKeyPEM{ID: policyKeyID(l, ver), PEM: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: block.Bytes})})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, latest, nil
}

// PolicyVerificationKeys returns the public keys of every version of the
// policy-bundle signing key (read now from Vault; the server uses them to
// verify bundles, serve --policy-key-vault).
func (v *Vault) PolicyVerificationKeys(ctx context.Context) ([]PublicKeyPEM, error) {
	keys, _, err := readPolicyKeys(ctx, v.client, v.opts.Layout, func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, v.opts.RequestTimeout)
	})
	return keys, err
}

// PolicySigner signs policy bundles with the Transit ecdsa-p256 key: ES256
// JWS signatures (Transit marshaling_algorithm=jws), the private key never
// leaving Vault. It satisfies policy.JWSSigner.
type PolicySigner struct {
	client *vault.Client
	opts   VaultOptions
	ver    int
}

// OpenPolicySigner connects with opts (token auth: the security team's
// token with policy custos-policy-signer) and reads the policy key.
func OpenPolicySigner(ctx context.Context, opts VaultOptions) (*PolicySigner, error) {
	if opts.Token == "" {
		return nil, fmt.Errorf("%w: signing policy bundles with Vault needs a token ($VAULT_TOKEN) holding policy %q", ErrBadConfig, PolicySignerPolicyName)
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	cfg := vault.DefaultConfig()
	cfg.Address, cfg.Timeout, cfg.MaxRetries = opts.Address, opts.RequestTimeout, 1
	if opts.TLS != nil {
		if err := cfg.ConfigureTLS(opts.TLS); err != nil {
			return nil, fmt.Errorf("%w: vault TLS: %v", ErrBadConfig, err)
		}
	}
	if err := checkClientEnv(cfg); err != nil {
		return nil, err
	}
	c, err := vault.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: vault client: %v", ErrBadConfig, err)
	}
	c.SetToken(opts.Token)
	p := &PolicySigner{client: c, opts: opts}
	_, latest, err := readPolicyKeys(ctx, c, opts.Layout, func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, opts.RequestTimeout)
	})
	if err != nil {
		return nil, err
	}
	p.ver = latest
	return p, nil
}

// KeyID names the key version that signs: "vault:transit/KEY@vN".
func (p *PolicySigner) KeyID() string { return policyKeyID(p.opts.Layout, p.ver) }

// SignES256 returns the 64-byte r||s signature of SHA-256(in).
func (p *PolicySigner) SignES256(ctx context.Context, in []byte) ([]byte, error) {
	l := p.opts.Layout
	api := l.TransitPath("sign", l.PolicyKey)
	cctx, cancel := context.WithTimeout(ctx, p.opts.RequestTimeout)
	defer cancel()
	s, err := p.client.Logical().WriteWithContext(cctx, api, map[string]any{
		"input": base64.StdEncoding.EncodeToString(in), "hash_algorithm": "sha2-256", "marshaling_algorithm": "jws",
		"key_version": p.ver,
	})
	if err != nil {
		return nil, vaultErr("update", api, err, "")
	}
	sig, _ := s.Data["signature"].(string)
	rest, ok := strings.CutPrefix(sig, "vault:v"+strconv.Itoa(p.ver)+":")
	if !ok {
		return nil, fmt.Errorf("%w: %s: signature of another key version", ErrUnavailable, api)
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(raw) != 64 {
		return nil, fmt.Errorf("%w: %s: not a 64-byte JWS ES256 signature", ErrUnavailable, api)
	}
	return raw, nil
}
