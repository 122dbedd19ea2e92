package vaulttest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/custos-mcp/custos/secrets"
	"github.com/hashicorp/vault/api"
)

// AppRole names used by [Server.Provision].
const (
	// AppRoleMount is the mount path of the AppRole auth method.
	AppRoleMount = "approle"
	// RoleName is the AppRole role custos logs in as.
	RoleName = "custos"
	// RoleIDFileName and SecretIDFileName are the file names, inside
	// ProvisionOptions.Dir, of the role id and the secret id.
	RoleIDFileName   = "role-id"
	SecretIDFileName = "secret-id"
)

// Defaults of [ProvisionOptions].
const (
	DefaultTokenTTL    = 20 * time.Minute
	DefaultTokenMaxTTL = time.Hour
	DefaultWrapTTL     = 5 * time.Minute
)

// ProvisionOptions configures [Server.Provision].
type ProvisionOptions struct {
	// Dir is the directory that receives the role id and secret id files
	// (mode 0600). Required.
	Dir string
	// CursorKey and AuditKey are the KV key bytes to store; nil means fresh
	// random bytes. When set they must be exactly secrets.KeySize bytes
	// (leak tests pass recognizable canaries); use [Server.PutKV] to store
	// malformed values.
	CursorKey, AuditKey []byte
	// TokenTTL and TokenMaxTTL are the AppRole role's token_ttl and
	// token_max_ttl; zero means DefaultTokenTTL and DefaultTokenMaxTTL.
	TokenTTL, TokenMaxTTL time.Duration
	// WrapSecretID also issues a response-wrapped secret id
	// (Provisioned.WrappedSecretID) valid for WrapTTL (zero means
	// DefaultWrapTTL).
	WrapSecretID bool
	WrapTTL      time.Duration
}

// validate checks the options without contacting Vault.
func (o ProvisionOptions) validate() error {
	if o.Dir == "" {
		return fmt.Errorf("%w: Dir is required", ErrBadOptions)
	}
	for name, k := range map[string][]byte{"CursorKey": o.CursorKey, "AuditKey": o.AuditKey} {
		if k != nil && len(k) != secrets.KeySize {
			return fmt.Errorf("%w: %s is %d bytes, want %d", ErrBadOptions, name, len(k), secrets.KeySize)
		}
	}
	if o.TokenTTL < 0 || o.TokenMaxTTL < 0 || o.WrapTTL < 0 {
		return fmt.Errorf("%w: negative TTL", ErrBadOptions)
	}
	return nil
}

// Provisioned is what [Server.Provision] set up: everything a custos server
// configuration or a test needs to reach the provisioned secrets.
type Provisioned struct {
	// Layout is where the secrets live (secrets.DefaultLayout).
	Layout secrets.Layout
	// RoleID and SecretID are the AppRole credentials of RoleName;
	// RoleIDFile and SecretIDFile hold the same values (no trailing newline).
	RoleID, RoleIDFile     string
	SecretID, SecretIDFile string
	// WrappedSecretID is a response-wrapping token whose single unwrap yields
	// a further secret id (only with ProvisionOptions.WrapSecretID).
	WrappedSecretID string
	// Token is a service token holding secrets.PolicyName (and "default").
	Token string
	// CursorKey, AuditKey and IDKey are the key bytes stored in KV (version 1).
	CursorKey, AuditKey, IDKey []byte
}

// Provision sets up the server for custos with the root token:
//
//  1. enable Transit at Layout.TransitMount (if not yet enabled);
//  2. create Layout.SigningKey (ed25519), Layout.BlobKey (aes256-gcm96),
//     Layout.PolicyKey (ecdsa-p256) and Layout.FHIRClientKey (ecdsa-p384),
//     none exportable;
//  3. write Layout.CursorKeyPath, Layout.AuditKeyPath and Layout.IDKeyPath
//     (fresh random bytes) in KV v2 with field
//     secrets.KVField = base64(key);
//  4. write the ACL policy secrets.PolicyName = secrets.PolicyHCL;
//  5. enable AppRole at AppRoleMount (if not yet enabled) and write role
//     RoleName with token_policies=[PolicyName], the token TTLs and
//     secret_id_ttl=0;
//  6. read the role id, generate a secret id (and optionally a wrapped one)
//     and write RoleIDFileName and SecretIDFileName into opts.Dir;
//  7. create a service token with PolicyName.
//
// Call it once per server. Errors name the step that failed; they never
// contain key bytes or tokens.
func (s *Server) Provision(ctx context.Context, opts ProvisionOptions) (*Provisioned, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.TokenTTL == 0 {
		opts.TokenTTL = DefaultTokenTTL
	}
	if opts.TokenMaxTTL == 0 {
		opts.TokenMaxTTL = DefaultTokenMaxTTL
	}
	if opts.WrapTTL == 0 {
		opts.WrapTTL = DefaultWrapTTL
	}
	l := secrets.DefaultLayout
	p := &Provisioned{Layout: l}
	var err error
	if p.CursorKey, err = keyOrRandom(opts.CursorKey); err != nil {
		return nil, err
	}
	if p.AuditKey, err = keyOrRandom(opts.AuditKey); err != nil {
		return nil, err
	}
	if p.IDKey, err = keyOrRandom(nil); err != nil {
		return nil, err
	}
	c := s.Root()
	step := func(name string, err error) error {
		if err != nil {
			return fmt.Errorf("vaulttest: provision: %s: %w", name, err)
		}
		return nil
	}

	// 1. Transit.
	if err := step("enable transit at "+l.TransitMount, s.ensureMount(ctx, c, l.TransitMount, "transit")); err != nil {
		return nil, err
	}
	// 2. Transit keys.
	for _, k := range []struct{ name, typ string }{{l.SigningKey, "ed25519"}, {l.BlobKey, "aes256-gcm96"}, {l.PolicyKey, "ecdsa-p256"}, {l.FHIRClientKey, "ecdsa-p384"}} {
		if err := step("create transit key "+k.name, createTransitKey(ctx, c, l.TransitMount, k.name, k.typ)); err != nil {
			return nil, err
		}
	}
	// 3. KV secrets.
	for _, kv := range []struct {
		path string
		key  []byte
	}{{l.CursorKeyPath, p.CursorKey}, {l.AuditKeyPath, p.AuditKey}, {l.IDKeyPath, p.IDKey}} {
		_, err := s.putKV(ctx, kv.path, kvValue(kv.key))
		if err := step("write kv "+l.KVDataPath(kv.path), err); err != nil {
			return nil, err
		}
	}
	// 4. Policy.
	if err := step("write policy "+secrets.PolicyName, c.Sys().PutPolicyWithContext(ctx, secrets.PolicyName, secrets.PolicyHCL)); err != nil {
		return nil, err
	}
	// 5. AppRole.
	if err := step("enable auth "+AppRoleMount, s.ensureAuth(ctx, c, AppRoleMount, "approle")); err != nil {
		return nil, err
	}
	rolePath := "auth/" + AppRoleMount + "/role/" + RoleName
	_, err = c.Logical().WriteWithContext(ctx, rolePath, map[string]any{
		"token_policies": []string{secrets.PolicyName},
		"token_ttl":      seconds(opts.TokenTTL),
		"token_max_ttl":  seconds(opts.TokenMaxTTL),
		"secret_id_ttl":  "0s",
	})
	if err := step("write role "+RoleName, err); err != nil {
		return nil, err
	}
	// 6. Credentials.
	sec, err := c.Logical().ReadWithContext(ctx, rolePath+"/role-id")
	if p.RoleID, err = stringField(sec, err, "role_id"); err != nil {
		return nil, step("read role id", err)
	}
	sec, err = c.Logical().WriteWithContext(ctx, rolePath+"/secret-id", nil)
	if p.SecretID, err = stringField(sec, err, "secret_id"); err != nil {
		return nil, step("generate secret id", err)
	}
	if opts.WrapSecretID {
		wc := s.Root()
		ttl := seconds(opts.WrapTTL)
		wc.SetWrappingLookupFunc(func(string, string) string { return ttl })
		sec, err := wc.Logical().WriteWithContext(ctx, rolePath+"/secret-id", nil)
		if err == nil && (sec == nil || sec.WrapInfo == nil || sec.WrapInfo.Token == "") {
			err = errors.New("response is not wrapped")
		}
		if err != nil {
			return nil, step("generate wrapped secret id", err)
		}
		p.WrappedSecretID = sec.WrapInfo.Token
	}
	p.RoleIDFile = filepath.Join(opts.Dir, RoleIDFileName)
	p.SecretIDFile = filepath.Join(opts.Dir, SecretIDFileName)
	if err := step("write "+p.RoleIDFile, writePrivate(p.RoleIDFile, p.RoleID)); err != nil {
		return nil, err
	}
	if err := step("write "+p.SecretIDFile, writePrivate(p.SecretIDFile, p.SecretID)); err != nil {
		return nil, err
	}
	// 7. Service token.
	if p.Token, err = s.tokenFor(ctx, c, secrets.PolicyName); err != nil {
		return nil, step("create token with policy "+secrets.PolicyName, err)
	}
	return p, nil
}

// TokenWithPolicy writes the ACL policy name = hcl and returns a new service
// token holding only that policy (and "default"). Negative tests use it to
// show that custos fails closed with too little privilege.
func (s *Server) TokenWithPolicy(ctx context.Context, name, hcl string) (string, error) {
	c := s.Root()
	if err := c.Sys().PutPolicyWithContext(ctx, name, hcl); err != nil {
		return "", fmt.Errorf("vaulttest: write policy %s: %w", name, err)
	}
	tok, err := s.tokenFor(ctx, c, name)
	if err != nil {
		return "", fmt.Errorf("vaulttest: create token with policy %s: %w", name, err)
	}
	return tok, nil
}

func (s *Server) tokenFor(ctx context.Context, c *api.Client, policy string) (string, error) {
	sec, err := c.Auth().Token().CreateWithContext(ctx, &api.TokenCreateRequest{
		Policies:    []string{policy},
		TTL:         "1h",
		DisplayName: "vaulttest-" + policy,
	})
	if err != nil {
		return "", err
	}
	if sec == nil || sec.Auth == nil || sec.Auth.ClientToken == "" {
		return "", errors.New("no token in response")
	}
	return sec.Auth.ClientToken, nil
}

// RotateKV writes key as a new version of the KV v2 secret at path (below
// secrets.DefaultLayout.KVMount), in the layout custos reads (field
// secrets.KVField, standard base64), and returns the new version number.
// It does not check the key size, so tests can store wrong-sized keys.
func (s *Server) RotateKV(ctx context.Context, path string, key []byte) (int, error) {
	return s.PutKV(ctx, path, kvValue(key))
}

// kvValue is the KV secret data custos reads: {KVField: base64(key)}.
func kvValue(key []byte) map[string]any {
	return map[string]any{secrets.KVField: base64.StdEncoding.EncodeToString(key)}
}

// PutKV writes data verbatim as a new version of the KV v2 secret at path
// (below secrets.DefaultLayout.KVMount) and returns the new version number.
// Tests use it to store malformed secrets (missing field, bad base64).
func (s *Server) PutKV(ctx context.Context, path string, data map[string]any) (int, error) {
	v, err := s.putKV(ctx, path, data)
	if err != nil {
		return 0, fmt.Errorf("vaulttest: write kv %s: %w", secrets.DefaultLayout.KVDataPath(path), err)
	}
	return v, nil
}

func (s *Server) putKV(ctx context.Context, path string, data map[string]any) (int, error) {
	kv, err := s.Root().KVv2(secrets.DefaultLayout.KVMount).Put(ctx, path, data)
	if err != nil {
		return 0, err
	}
	if kv == nil || kv.VersionMetadata == nil {
		return 0, errors.New("no version in response")
	}
	return kv.VersionMetadata.Version, nil
}

// RotateTransit rotates the Transit key named key (below
// secrets.DefaultLayout.TransitMount) to a new version.
func (s *Server) RotateTransit(ctx context.Context, key string) error {
	p := secrets.DefaultLayout.TransitMount + "/keys/" + key + "/rotate"
	if _, err := s.Root().Logical().WriteWithContext(ctx, p, nil); err != nil {
		return fmt.Errorf("vaulttest: rotate %s: %w", p, err)
	}
	return nil
}

// ensureMount enables a secrets engine of type typ at path unless a mount of
// that type is already there.
func (s *Server) ensureMount(ctx context.Context, c *api.Client, path, typ string) error {
	mounts, err := c.Sys().ListMountsWithContext(ctx)
	if err != nil {
		return err
	}
	if m, ok := mounts[path+"/"]; ok {
		if m.Type != typ {
			return fmt.Errorf("path holds a %q mount", m.Type)
		}
		return nil
	}
	return c.Sys().MountWithContext(ctx, path, &api.MountInput{Type: typ})
}

// ensureAuth enables an auth method of type typ at path unless one of that
// type is already there.
func (s *Server) ensureAuth(ctx context.Context, c *api.Client, path, typ string) error {
	auths, err := c.Sys().ListAuthWithContext(ctx)
	if err != nil {
		return err
	}
	if m, ok := auths[path+"/"]; ok {
		if m.Type != typ {
			return fmt.Errorf("path holds a %q auth method", m.Type)
		}
		return nil
	}
	return c.Sys().EnableAuthWithOptionsWithContext(ctx, path, &api.EnableAuthOptions{Type: typ})
}

// createTransitKey creates a non-exportable key and checks that what Vault
// holds under the name has the wanted type and is not exportable.
func createTransitKey(ctx context.Context, c *api.Client, mount, name, typ string) error {
	p := mount + "/keys/" + name
	if _, err := c.Logical().WriteWithContext(ctx, p, map[string]any{
		"type":                   typ,
		"exportable":             false,
		"allow_plaintext_backup": false,
	}); err != nil {
		return err
	}
	sec, err := c.Logical().ReadWithContext(ctx, p)
	if err != nil {
		return err
	}
	if sec == nil {
		return errors.New("key not found after creation")
	}
	if got, _ := sec.Data["type"].(string); got != typ {
		return fmt.Errorf("key has type %q, want %q", got, typ)
	}
	if exp, _ := sec.Data["exportable"].(bool); exp {
		return errors.New("key is exportable")
	}
	return nil
}

// keyOrRandom copies k, or draws secrets.KeySize random bytes if k is nil.
func keyOrRandom(k []byte) ([]byte, error) {
	if k != nil {
		return append([]byte(nil), k...), nil
	}
	b := make([]byte, secrets.KeySize)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("vaulttest: provision: drawing key: %w", err)
	}
	return b, nil
}

// stringField returns the non-empty string field name of a response.
func stringField(sec *api.Secret, err error, name string) (string, error) {
	if err != nil {
		return "", err
	}
	if sec == nil {
		return "", errors.New("empty response")
	}
	switch v := sec.Data[name].(type) {
	case string:
		if v != "" {
			return v, nil
		}
	case json.Number:
		return v.String(), nil
	}
	return "", fmt.Errorf("no %s in response", name)
}

// writePrivate writes a fresh file readable only by its owner.
func writePrivate(path, value string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(value); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// seconds formats d as a Vault duration string in whole seconds.
func seconds(d time.Duration) string {
	return fmt.Sprintf("%ds", int64(d/time.Second))
}
