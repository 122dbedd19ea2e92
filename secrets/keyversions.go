package secrets

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	vault "github.com/hashicorp/vault/api"
)

// KeyVersion is one version of the audit keyed-hash key, as the audit tools
// search the log with it: its id (the form audit records name it in their
// keys field, "secret/custos/audit-hmac-key@3"), its version number, and
// either its bytes or why they cannot be read.
type KeyVersion struct {
	ID      string
	Version int
	// Key is the key; nil when it cannot be read.
	Key *Key
	// Problem says why the version cannot be read ("destroyed in Vault",
	// "deleted in Vault", "no longer kept by Vault (max_versions)", or the
	// read error); "" when Key is set. It never holds key material.
	Problem string
}

// AuditKeyHistory is every version of the audit keyed-hash key ever
// written, newest first: what a patient lookup must search, because each
// record was keyed under the version in force when it was written.
type AuditKeyHistory []KeyVersion

// Keys returns the versions that can be read, newest first.
func (h AuditKeyHistory) Keys() []Key {
	var out []Key
	for _, v := range h {
		if v.Key != nil {
			out = append(out, v.Key.clone())
		}
	}
	return out
}

// Unreadable returns the versions that cannot be read, newest first. A
// lookup without them misses every record keyed under them.
func (h AuditKeyHistory) Unreadable() []KeyVersion {
	var out []KeyVersion
	for _, v := range h {
		if v.Key == nil {
			out = append(out, v)
		}
	}
	return out
}

// KVMetadataPath is the API path of a KV v2 secret's metadata
// ("secret/metadata/custos/audit-hmac-key"), as it appears in ACL policies.
func (l Layout) KVMetadataPath(p string) string { return l.KVMount + "/metadata/" + p }

// AuditKeyHistory reads every version of the audit keyed-hash key from
// Vault: the version list from the KV v2 metadata (versions 1 to the
// current one), then each version not destroyed or deleted. A version that
// cannot be read is listed with its Problem, not dropped: the caller
// decides whether a lookup may go on without it. The error is for the
// metadata itself (missing, or the token lacks the custos-auditor rule for
// it).
func (v *Vault) AuditKeyHistory(ctx context.Context) (AuditKeyHistory, error) {
	l := v.opts.Layout
	path := l.AuditKeyPath
	api := l.KVMetadataPath(path)
	cctx, cancel := context.WithTimeout(ctx, v.opts.RequestTimeout)
	md, err := v.client.KVv2(l.KVMount).GetMetadata(cctx, path)
	cancel()
	if err != nil {
		if errors.Is(err, vault.ErrSecretNotFound) {
			return nil, fmt.Errorf("%w: %s: no metadata (is the audit key written, and %q a KV version 2 mount?)", ErrMissing, api, l.KVMount)
		}
		return nil, vaultErr("read", api, err, fmt.Sprintf("the token's policies do not allow it; the audit tools need the rule "+
			"path %q { capabilities = [\"read\"] } of policy %q (docs/vault.md)", api, AuditorPolicyName))
	}
	if md.CurrentVersion < 1 {
		return nil, fmt.Errorf("%w: %s: no version written", ErrMissing, api)
	}
	var held []Key
	if st := v.state.Load(); st != nil {
		held = st.audits
	}
	out := make(AuditKeyHistory, 0, md.CurrentVersion)
	for ver := md.CurrentVersion; ver >= 1; ver-- {
		kv := KeyVersion{ID: kvKeyID(l, path, ver), Version: ver}
		meta, kept := md.Versions[strconv.Itoa(ver)]
		switch {
		case !kept:
			kv.Problem = "no longer kept by Vault (beyond the secret's max_versions)"
		case meta.Destroyed:
			kv.Problem = "destroyed in Vault"
		case deleted(meta.DeletionTime, v.opts.Now()):
			kv.Problem = "deleted in Vault (undelete it to search it)"
		}
		if kv.Problem == "" {
			if i := slices.IndexFunc(held, func(k Key) bool { return k.ID == kv.ID }); i >= 0 {
				k := held[i].clone()
				kv.Key = &k
			} else if got, err := v.readKV(ctx, path, ver); err != nil {
				kv.Problem = err.Error()
			} else {
				kv.Key = &got.key
			}
		}
		out = append(out, kv)
	}
	return out, nil
}

// deleted reports whether a KV v2 version with this deletion_time is
// deleted at now. Vault sets deletion_time in the future for a version that
// delete_version_after will delete, and the version stays readable until
// then (its KV v2 engine reads a version as deleted only once deletion_time
// is before now).
func deleted(deletionTime, now time.Time) bool {
	return !deletionTime.IsZero() && !deletionTime.After(now)
}

// AuditKeyHistory returns the dev provider's one audit key version.
func (d *Dev) AuditKeyHistory(context.Context) (AuditKeyHistory, error) {
	k := d.audit.clone()
	return AuditKeyHistory{{ID: k.ID, Version: 1, Key: &k}}, nil
}
