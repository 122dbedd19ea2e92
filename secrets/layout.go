package secrets

import (
	_ "embed"
	"fmt"
	"strings"
)

// PolicyName is the name under which the ACL policy in PolicyHCL is written
// to Vault (docs/vault.md).
const PolicyName = "custos-server"

// PolicyHCL is the least-privilege Vault ACL policy for DefaultLayout: the
// single source of docs/vault.md and of the test provisioning.
//
//go:embed vault-policy.hcl
var PolicyHCL string

// AuditorPolicyName and AuditorPolicyHCL are the ACL policy for the audit
// tools (VaultOptions.AuditorOnly): read the audit keyed-hash key and the
// signing key's public keys, nothing else.
const AuditorPolicyName = "custos-auditor"

//go:embed vault-auditor-policy.hcl
var AuditorPolicyHCL string

// PolicySignerPolicyName and PolicySignerHCL are the ACL policy of the
// security team's signing identity: sign with the policy key, read its
// public keys, nothing else.
const PolicySignerPolicyName = "custos-policy-signer"

//go:embed vault-policy-signer.hcl
var PolicySignerHCL string

// Layout names where custos's secrets live in Vault. Every field is a Vault
// path component, never a secret value: configuration refers to secrets only
// by path.
type Layout struct {
	// KVMount is the mount of the KV version 2 engine ("secret").
	KVMount string
	// CursorKeyPath is the KV path (below KVMount) of the cursor sealing key.
	CursorKeyPath string
	// AuditKeyPath is the KV path of the audit keyed-hash (HMAC) key.
	AuditKeyPath string
	// IDKeyPath is the KV path of the resource id key: the HMAC key of the
	// opaque ids of imported FHIR resources (store.ResourceID). It is never
	// rotated: a new version would give every resource a new URI, so the
	// catalog records the version it was imported under and refuses another.
	IDKeyPath string
	// TransitMount is the mount of the Transit engine ("transit").
	TransitMount string
	// SigningKey is the Transit key (type ed25519, not exportable) that signs
	// audit checkpoints.
	SigningKey string
	// BlobKey is the Transit key (type aes256-gcm96) that wraps per-blob data
	// keys (envelope encryption at rest).
	BlobKey string
	// PolicyKey is the Transit key (type ecdsa-p256) with which the security
	// team signs policy bundles; servers read only its public keys.
	PolicyKey string
	// FHIRClientKey is the Transit key (type ecdsa-p384, not exportable)
	// that signs custos sync's SMART Backend Services client assertions
	// (ES384); the FHIR server registers its public key.
	FHIRClientKey string
}

// DefaultLayout is the layout PolicyHCL grants.
var DefaultLayout = Layout{
	KVMount:       "secret",
	CursorKeyPath: "custos/cursor-key",
	AuditKeyPath:  "custos/audit-hmac-key",
	IDKeyPath:     "custos/id-key",
	TransitMount:  "transit",
	SigningKey:    "custos-audit-signing",
	BlobKey:       "custos-blob-kek",
	PolicyKey:     "custos-policy-signing",
	FHIRClientKey: "custos-fhir-client",
}

// KV secret values: each KV secret holds one field, KVField, whose value is
// the standard base64 encoding of exactly KeySize random bytes.
const KVField = "key"

// withDefaults fills empty fields from DefaultLayout.
func (l Layout) withDefaults() Layout {
	d := DefaultLayout
	for _, f := range []struct {
		dst *string
		def string
	}{
		{&l.KVMount, d.KVMount}, {&l.CursorKeyPath, d.CursorKeyPath}, {&l.AuditKeyPath, d.AuditKeyPath},
		{&l.IDKeyPath, d.IDKeyPath},
		{&l.TransitMount, d.TransitMount}, {&l.SigningKey, d.SigningKey}, {&l.BlobKey, d.BlobKey},
		{&l.PolicyKey, d.PolicyKey}, {&l.FHIRClientKey, d.FHIRClientKey},
	} {
		if *f.dst == "" {
			*f.dst = f.def
		}
	}
	return l
}

// validate rejects path components that could not be Vault paths or that
// look like they carry a value instead of naming one.
func (l Layout) validate() error {
	for name, v := range map[string]string{
		"kv mount": l.KVMount, "cursor key path": l.CursorKeyPath, "audit key path": l.AuditKeyPath, "id key path": l.IDKeyPath,
		"transit mount": l.TransitMount, "signing key": l.SigningKey, "blob key": l.BlobKey,
		"policy key": l.PolicyKey, "fhir client key": l.FHIRClientKey,
	} {
		if strings.Trim(v, "/") != v || strings.ContainsAny(v, "?#@:= \t\r\n") || strings.Contains(v, "..") {
			return fmt.Errorf("%w: %s must be a plain Vault path (no leading or trailing '/', '?', '#', '@', ':', '=', spaces or '..')", ErrBadConfig, name)
		}
	}
	return nil
}

// KVDataPath is the API path of a KV v2 secret ("secret/data/custos/cursor-key"),
// as it appears in ACL policies.
func (l Layout) KVDataPath(p string) string { return l.KVMount + "/data/" + p }

// TransitPath is the API path of a Transit operation on key
// ("transit/sign/custos-audit-signing").
func (l Layout) TransitPath(op, key string) string { return l.TransitMount + "/" + op + "/" + key }
