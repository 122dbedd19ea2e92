package secrets_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	vault "github.com/hashicorp/vault/api"

	"github.com/custos-mcp/custos/internal/syncbuf"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/secrets/vaulttest"
)

// syncBuffer collects a provider's log lines from its background goroutine.
type syncBuffer = syncbuf.Buffer

// provisioned starts a real Vault dev server and provisions custos's keys,
// policies and AppRole in it (vaulttest.Provision), files in a temporary
// directory.
func provisioned(t *testing.T) (*vaulttest.Server, *vaulttest.Provisioned) {
	t.Helper()
	srv := vaulttest.Start(t, vaulttest.Options{})
	p, err := srv.Provision(context.Background(), vaulttest.ProvisionOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return srv, p
}

// canaries are the encodings in which a secret could leak.
func canaries(secretStrings []string, keys ...[]byte) []string {
	out := append([]string(nil), secretStrings...)
	for _, k := range keys {
		out = append(out, string(k), hex.EncodeToString(k), base64.StdEncoding.EncodeToString(k), base64.RawURLEncoding.EncodeToString(k))
	}
	return out
}

func assertNoCanary(t *testing.T, where, text string, canaries []string) {
	t.Helper()
	for _, c := range canaries {
		if c != "" && strings.Contains(text, c) {
			t.Errorf("%s contains a secret (%d-byte canary)", where, len(c))
		}
	}
}

func openAppRole(t *testing.T, srv *vaulttest.Server, p *vaulttest.Provisioned, mod func(*secrets.VaultOptions)) (*secrets.Vault, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	o := secrets.VaultOptions{
		Address: srv.Addr,
		AppRole: &secrets.AppRole{RoleIDFile: p.RoleIDFile, SecretIDFile: p.SecretIDFile},
		Logger:  slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mod != nil {
		mod(&o)
	}
	v, err := secrets.OpenVault(context.Background(), o)
	if err != nil {
		t.Fatalf("OpenVault: %v", err)
	}
	t.Cleanup(func() { v.Close() })
	return v, logs
}

func TestVaultLoadsEveryKeyAndUsesTransit(t *testing.T) {
	srv, p := provisioned(t)
	ctx := context.Background()
	v, logs := openAppRole(t, srv, p, nil)

	ck, err := v.CursorKeys(ctx)
	if err != nil || len(ck) != 1 || !bytes.Equal(ck[0].Bytes, p.CursorKey) {
		t.Fatalf("cursor keys = %v, %v; want the provisioned key", ck, err)
	}
	ak, err := v.AuditKey(ctx)
	if err != nil || !bytes.Equal(ak.Bytes, p.AuditKey) {
		t.Fatalf("audit key = %v, %v", ak, err)
	}
	ik, err := v.IDKey(ctx)
	if err != nil || !bytes.Equal(ik.Bytes, p.IDKey) || ik.ID != "secret/custos/id-key@1" {
		t.Fatalf("id key = %v, %v; want the provisioned key, version 1", ik, err)
	}
	want := "audit-hmac=secret/custos/audit-hmac-key@1 blob-kek=transit/custos-blob-kek@1 cursor=secret/custos/cursor-key@1 signing=transit/custos-audit-signing@1"
	if got := strings.Join(v.KeyIDs(), " "); got != want {
		t.Fatalf("KeyIDs = %q\nwant     %q", got, want)
	}
	if v.Dev() {
		t.Fatal("vault provider reports dev keys")
	}
	if err := v.Check(); err != nil {
		t.Fatalf("fresh keys: Check = %v", err)
	}

	// Vault signs; the signature verifies locally with the public key.
	msg := []byte("custos.example/audit\n42\nroot\n")
	sig, ver, err := v.Sign(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	pub, pver, err := v.PublicKey(0)
	if err != nil || pver != ver || !ed25519.Verify(pub, msg, sig) || !v.Verify(msg, sig, ver) {
		t.Fatalf("signature does not verify (version %d/%d, err %v)", ver, pver, err)
	}
	if v.Verify(append(msg, '!'), sig, ver) {
		t.Fatal("signature verified over a different message")
	}

	// Envelope: a fresh data key unwraps to itself, from Vault and from the cache.
	key, wrapped, err := v.NewDataKey(ctx)
	if err != nil || len(key) != 32 || !bytes.HasPrefix(wrapped, []byte("vault:v1:")) {
		t.Fatalf("NewDataKey = %d bytes, %q, %v", len(key), wrapped, err)
	}
	other, _ := openAppRole(t, srv, p, nil) // empty cache: must ask Vault
	got, err := other.UnwrapDataKey(ctx, wrapped)
	if err != nil || !bytes.Equal(got, key) {
		t.Fatalf("UnwrapDataKey via Vault = %v", err)
	}
	if _, err := other.UnwrapDataKey(ctx, []byte("vault:v1:AAAA")); err == nil {
		t.Fatal("a forged wrapped key unwrapped")
	}

	assertNoCanary(t, "provider log", logs.String(),
		canaries([]string{p.SecretID, p.RoleID, p.Token, srv.RootToken}, p.CursorKey, p.AuditKey, key))
	assertNoCanary(t, "provider name", v.Name(), canaries([]string{p.SecretID, p.RoleID}))
}

// TestVaultRotationKeepsOldVersionsUsable runs under -race (tools/racetests): the background refresh picks up the new key versions while the test uses the keys.
//
//custos:race
func TestVaultRotationKeepsOldVersionsUsable(t *testing.T) {
	srv, p := provisioned(t)
	ctx := context.Background()
	v, _ := openAppRole(t, srv, p, nil)
	_, oldWrapped, err := v.NewDataKey(ctx)
	if err != nil {
		t.Fatal(err)
	}

	newCursor := bytes.Repeat([]byte{7}, 32)
	if _, err := srv.RotateKV(ctx, p.Layout.CursorKeyPath, newCursor); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.RotateKV(ctx, p.Layout.AuditKeyPath, bytes.Repeat([]byte{9}, 32)); err != nil {
		t.Fatal(err)
	}
	if err := srv.RotateTransit(ctx, p.Layout.BlobKey); err != nil {
		t.Fatal(err)
	}
	if err := srv.RotateTransit(ctx, p.Layout.SigningKey); err != nil {
		t.Fatal(err)
	}
	if err := v.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	want := "audit-hmac=secret/custos/audit-hmac-key@2 blob-kek=transit/custos-blob-kek@2 cursor=secret/custos/cursor-key@2 signing=transit/custos-audit-signing@2"
	if got := strings.Join(v.KeyIDs(), " "); got != want {
		t.Fatalf("after rotation KeyIDs = %q\nwant %q", got, want)
	}
	ck, _ := v.CursorKeys(ctx)
	if len(ck) != 2 || !bytes.Equal(ck[0].Bytes, newCursor) || !bytes.Equal(ck[1].Bytes, p.CursorKey) {
		t.Fatalf("cursor keys after rotation: %v (want new first, then the old one)", ck)
	}
	// New data keys are wrapped by the new KEK version; old ones still unwrap.
	_, nw, err := v.NewDataKey(ctx)
	if err != nil || !bytes.HasPrefix(nw, []byte("vault:v2:")) {
		t.Fatalf("new data key after rotation: %q, %v", nw, err)
	}
	fresh, _ := openAppRole(t, srv, p, nil)
	oldKey, err := fresh.UnwrapDataKey(ctx, oldWrapped)
	if err != nil {
		t.Fatalf("old wrapped key no longer unwraps: %v", err)
	}
	re, err := fresh.RewrapDataKey(ctx, oldWrapped)
	if err != nil || !bytes.HasPrefix(re, []byte("vault:v2:")) {
		t.Fatalf("rewrap: %q, %v", re, err)
	}
	again, _ := openAppRole(t, srv, p, nil)
	if k, err := again.UnwrapDataKey(ctx, re); err != nil || !bytes.Equal(k, oldKey) {
		t.Fatalf("rewrapped key unwraps to a different key (%v)", err)
	}
	// Signatures of both versions verify.
	sig, ver, err := v.Sign(ctx, []byte("m"))
	if err != nil || ver != 2 || !v.Verify([]byte("m"), sig, 2) {
		t.Fatalf("sign after rotation: version %d, %v", ver, err)
	}
}

// TestVaultKeysOutageFailsClosedAndRecovers runs under -race (tools/racetests): the background refresh fails and recovers while the test uses the keys.
//
//custos:race
func TestVaultKeysOutageFailsClosedAndRecovers(t *testing.T) {
	srv, p := provisioned(t)
	ctx := context.Background()
	v, logs := openAppRole(t, srv, p, func(o *secrets.VaultOptions) {
		o.MaxStaleness = 2 * time.Second
		o.RefreshInterval = 300 * time.Millisecond
		o.RequestTimeout = 300 * time.Millisecond
	})
	_, wrapped, err := v.NewDataKey(ctx) // cached
	if err != nil {
		t.Fatal(err)
	}

	srv.Pause()
	paused := true
	defer func() {
		if paused {
			srv.Resume()
		}
	}()
	// Until the limit the held keys serve; past it everything refuses,
	// including a data key that is still in the cache.
	waitFor(t, 20*time.Second, "keys to go stale", func() bool { return v.Check() != nil })
	err = v.Check()
	var se *secrets.StaleError
	if !errors.As(err, &se) || !errors.Is(err, secrets.ErrStale) || !errors.Is(err, secrets.ErrUnavailable) || se.Limit != 2*time.Second {
		t.Fatalf("Check while Vault is down = %v; want a *StaleError", err)
	}
	if _, err := v.CursorKeys(ctx); !errors.Is(err, secrets.ErrStale) {
		t.Fatalf("CursorKeys while stale = %v", err)
	}
	if _, err := v.UnwrapDataKey(ctx, wrapped); !errors.Is(err, secrets.ErrStale) {
		t.Fatalf("cached UnwrapDataKey while stale = %v (must not serve from cache)", err)
	}
	if _, _, err := v.Sign(ctx, []byte("m")); !errors.Is(err, secrets.ErrUnavailable) {
		t.Fatalf("Sign while stale = %v", err)
	}

	srv.Resume()
	paused = false
	waitFor(t, 20*time.Second, "keys to be fresh again", func() bool { return v.Check() == nil })
	if _, err := v.UnwrapDataKey(ctx, wrapped); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
	if !strings.Contains(logs.String(), "vault key refresh failed") {
		t.Fatal("the outage was not logged")
	}
}

// TestVaultAppRoleLogsInAgainAfterTokenExpiry runs under -race (tools/racetests): the background renewal logs in again while the test uses the keys.
//
//custos:race
func TestVaultAppRoleLogsInAgainAfterTokenExpiry(t *testing.T) {
	srv := vaulttest.Start(t, vaulttest.Options{})
	ctx := context.Background()
	p, err := srv.Provision(ctx, vaulttest.ProvisionOptions{Dir: t.TempDir(), TokenTTL: 2 * time.Second, TokenMaxTTL: 3 * time.Second, WrapSecretID: true})
	if err != nil {
		t.Fatal(err)
	}
	// Log in with the response-wrapped secret id (unwrapped once).
	wrappedFile := p.SecretIDFile + ".wrapped"
	writeFile(t, wrappedFile, p.WrappedSecretID)
	v, logs := openAppRole(t, srv, p, func(o *secrets.VaultOptions) {
		o.AppRole.SecretIDFile, o.AppRole.Wrapped = wrappedFile, true
		// No refresh inside the test window: only the lifetime watcher can
		// drive the re-logins.
		o.RefreshInterval = 50 * time.Second
		o.MaxStaleness = time.Minute
	})
	// Tokens live at most 3 s: past several maximum TTLs the provider has
	// logged in again each time and its keys are still fresh.
	waitFor(t, 30*time.Second, "three AppRole logins", func() bool { return v.Logins() >= 3 })
	if err := v.Check(); err != nil {
		t.Fatalf("keys after re-logins: %v", err)
	}
	waitFor(t, 10*time.Second, "a refresh through the current token", func() bool { return v.Refresh(ctx) == nil })
	// The lifetime watcher, not only a failed refresh, drove a re-login.
	if !strings.Contains(logs.String(), "vault token reached the end of its life; logging in again") {
		t.Errorf("no re-login by the lifetime watcher:\n%s", logs.String())
	}
	// A wrapping token is single-use: a second process cannot unwrap it.
	_, err = secrets.OpenVault(ctx, secrets.VaultOptions{Address: srv.Addr,
		AppRole: &secrets.AppRole{RoleIDFile: p.RoleIDFile, SecretIDFile: wrappedFile, Wrapped: true}})
	if err == nil || !strings.Contains(err.Error(), "sys/wrapping/unwrap") {
		t.Fatalf("second unwrap of the wrapping token: %v", err)
	}
	assertNoCanary(t, "error", err.Error(), canaries([]string{p.WrappedSecretID, p.SecretID, p.RoleID}))
}

func TestVaultStartupErrorsNameThePathAndTheRule(t *testing.T) {
	srv, p := provisioned(t)
	ctx := context.Background()
	// A policy without the signing rule.
	var weaker []string
	for _, block := range strings.Split(secrets.PolicyHCL, "path ") {
		if !strings.HasPrefix(block, `"transit/sign/`) {
			weaker = append(weaker, block)
		}
	}
	tok, err := srv.TokenWithPolicy(ctx, "custos-weaker", strings.Join(weaker, "path "))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		opts    secrets.VaultOptions
		is      error
		want    []string
		secrets []string
	}{
		{"policy lacks transit sign", secrets.VaultOptions{Address: srv.Addr, Token: tok}, secrets.ErrPermission,
			[]string{"transit/sign/custos-audit-signing", `capabilities = ["update"]`, `"custos-server"`}, []string{tok}},
		{"missing KV key", secrets.VaultOptions{Address: srv.Addr, Token: srv.RootToken, Layout: secrets.Layout{CursorKeyPath: "custos/nope"}}, secrets.ErrMissing,
			[]string{"secret/data/custos/nope", "vault kv put"}, []string{srv.RootToken}},
		{"missing id key", secrets.VaultOptions{Address: srv.Addr, Token: srv.RootToken, Layout: secrets.Layout{IDKeyPath: "custos/no-id-key"}}, secrets.ErrMissing,
			[]string{"secret/data/custos/no-id-key", "vault kv put"}, []string{srv.RootToken}},
		{"missing transit key", secrets.VaultOptions{Address: srv.Addr, Token: srv.RootToken, Layout: secrets.Layout{BlobKey: "nope"}}, secrets.ErrMissing,
			[]string{"transit/keys/nope", "type=aes256-gcm96"}, []string{srv.RootToken}},
		{"bad token", secrets.VaultOptions{Address: srv.Addr, Token: "hvs.not-a-token-canary"}, secrets.ErrPermission,
			[]string{"auth/token/lookup-self"}, []string{"hvs.not-a-token-canary"}},
		{"unreachable", secrets.VaultOptions{Address: "http://127.0.0.1:1", Token: tok, RequestTimeout: 300 * time.Millisecond}, secrets.ErrUnavailable,
			[]string{"auth/token/lookup-self"}, []string{tok}},
		{"credentials in the address", secrets.VaultOptions{Address: "http://user:pw-canary@127.0.0.1:1", Token: tok}, secrets.ErrBadConfig,
			[]string{"must not carry credentials"}, []string{"pw-canary"}},
		{"token in the query", secrets.VaultOptions{Address: srv.Addr + "?token=tok-canary", Token: tok}, secrets.ErrBadConfig,
			[]string{"must not carry credentials"}, []string{"tok-canary"}},
		// The secret id, the token, the KV keys and every unwrapped data
		// key would cross the network in clear text.
		{"plain http to a remote Vault", secrets.VaultOptions{Address: "http://vault.invalid:8200", Token: tok}, secrets.ErrBadConfig,
			[]string{"plain http:// only on a loopback host"}, []string{tok}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := secrets.OpenVault(ctx, c.opts)
			if err == nil {
				v.Close()
				t.Fatal("OpenVault succeeded")
			}
			if !errors.Is(err, c.is) {
				t.Fatalf("error %v does not match %v", err, c.is)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			assertNoCanary(t, "error", err.Error(), c.secrets)
		})
	}
	_ = p
}

func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestVaultAuditorOnly: the custos-auditor policy is enough for the audit
// tools and for nothing else.
func TestVaultAuditorOnly(t *testing.T) {
	srv, p := provisioned(t)
	ctx := context.Background()
	tok, err := srv.TokenWithPolicy(ctx, secrets.AuditorPolicyName, secrets.AuditorPolicyHCL)
	if err != nil {
		t.Fatal(err)
	}
	v, err := secrets.OpenVault(ctx, secrets.VaultOptions{Address: srv.Addr, Token: tok, AuditorOnly: true})
	if err != nil {
		t.Fatalf("auditor open: %v", err)
	}
	defer v.Close()
	ks, err := v.AuditKeys(ctx)
	if err != nil || len(ks) != 1 || !bytes.Equal(ks[0].Bytes, p.AuditKey) {
		t.Fatalf("auditor audit keys: %v %v", ks, err)
	}
	if _, _, err := v.PublicKey(0); err != nil {
		t.Fatalf("auditor public key: %v", err)
	}
	if _, err := v.CursorKeys(ctx); err == nil {
		t.Fatal("an auditor-only provider handed out cursor keys")
	}
	if _, _, err := v.Sign(ctx, []byte("x")); !errors.Is(err, secrets.ErrPermission) {
		t.Fatalf("auditor signing: %v, want permission denied", err)
	}
	if _, err := secrets.OpenVault(ctx, secrets.VaultOptions{Address: srv.Addr, Token: tok}); !errors.Is(err, secrets.ErrPermission) {
		t.Fatalf("server open with the auditor token: %v, want permission denied", err)
	}
}

// TestAuditKeyHistoryCoversEveryVersion: after four rotations the auditor
// reads all five audit key versions from the KV metadata (the in-memory
// set holds only three), and a destroyed or deleted version is listed with
// its problem, never dropped.
func TestAuditKeyHistoryCoversEveryVersion(t *testing.T) {
	srv, p := provisioned(t)
	ctx := context.Background()
	path := p.Layout.AuditKeyPath
	want := map[int][]byte{1: p.AuditKey}
	for ver := 2; ver <= 5; ver++ {
		k := bytes.Repeat([]byte{byte(ver)}, 32)
		if got, err := srv.RotateKV(ctx, path, k); err != nil || got != ver {
			t.Fatalf("rotation to version %d: %d %v", ver, got, err)
		}
		want[ver] = k
	}
	v := openAuditorOnly(t, srv, secrets.AuditorPolicyName, secrets.AuditorPolicyHCL)
	if held, _ := v.AuditKeys(ctx); len(held) != 3 {
		t.Fatalf("the provider holds %d versions in memory; this test shows the history reaches past them", len(held))
	}
	h, err := v.AuditKeyHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 5 || len(h.Keys()) != 5 || len(h.Unreadable()) != 0 {
		t.Fatalf("history: %d versions, %d readable", len(h), len(h.Keys()))
	}
	for i, kv := range h {
		ver := 5 - i
		if kv.Version != ver || kv.ID != "secret/custos/audit-hmac-key@"+strconv.Itoa(ver) || !bytes.Equal(kv.Key.Bytes, want[ver]) {
			t.Fatalf("history[%d] = %s (version %d), want version %d with its key", i, kv.ID, kv.Version, ver)
		}
	}

	kv2 := srv.Root().KVv2(p.Layout.KVMount)
	if err := kv2.Destroy(ctx, path, []int{2}); err != nil {
		t.Fatal(err)
	}
	if err := kv2.DeleteVersions(ctx, path, []int{4}); err != nil {
		t.Fatal(err)
	}
	h, err = v.AuditKeyHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids, problems []string
	for _, k := range h.Keys() {
		ids = append(ids, k.ID)
	}
	for _, u := range h.Unreadable() {
		problems = append(problems, u.ID+": "+u.Problem)
	}
	if strings.Join(ids, " ") != "secret/custos/audit-hmac-key@5 secret/custos/audit-hmac-key@3 secret/custos/audit-hmac-key@1" ||
		len(problems) != 2 || !strings.Contains(problems[0], "@4: deleted in Vault") || !strings.Contains(problems[1], "@2: destroyed in Vault") {
		t.Fatalf("after destroying v2 and deleting v4: readable %v, unreadable %v", ids, problems)
	}

	// The server's policy does not grant the metadata: the error names the
	// auditor policy's rule.
	sv := openAuditorOnly(t, srv, secrets.PolicyName, secrets.PolicyHCL)
	if _, err := sv.AuditKeyHistory(ctx); !errors.Is(err, secrets.ErrPermission) || !strings.Contains(err.Error(), `secret/metadata/custos/audit-hmac-key`) ||
		!strings.Contains(err.Error(), secrets.AuditorPolicyName) {
		t.Fatalf("history with the server's token: %v", err)
	}
}

// TestAuditKeyHistoryScheduledDeletionIsReadable: with the secret's
// delete_version_after set, Vault gives every version a deletion_time in
// the future, and the version stays readable until then. The history must
// search it, not report it "deleted in Vault" (which made every patient
// lookup refuse, or with --accept-key-gap skip the current key).
func TestAuditKeyHistoryScheduledDeletionIsReadable(t *testing.T) {
	srv, p := provisioned(t)
	ctx := context.Background()
	path := p.Layout.AuditKeyPath
	kv2 := srv.Root().KVv2(p.Layout.KVMount)
	if err := kv2.PutMetadata(ctx, path, vault.KVMetadataPutInput{DeleteVersionAfter: time.Hour}); err != nil {
		t.Fatal(err)
	}
	k2 := bytes.Repeat([]byte{2}, 32)
	if ver, err := srv.RotateKV(ctx, path, k2); err != nil || ver != 2 {
		t.Fatalf("rotation: %d %v", ver, err)
	}
	if md, err := kv2.GetMetadata(ctx, path); err != nil || md.Versions["2"].DeletionTime.IsZero() {
		t.Fatalf("version 2 has no scheduled deletion: %+v %v", md, err)
	}
	v := openAuditorOnly(t, srv, secrets.AuditorPolicyName, secrets.AuditorPolicyHCL)
	h, err := v.AuditKeyHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if u := h.Unreadable(); len(u) != 0 {
		t.Fatalf("a version scheduled for deletion in an hour is reported unreadable: %s: %s", u[0].ID, u[0].Problem)
	}
	if ks := h.Keys(); len(ks) != 2 || !bytes.Equal(ks[0].Bytes, k2) || !bytes.Equal(ks[1].Bytes, p.AuditKey) {
		t.Fatalf("history keys: %d, want versions 2 and 1 with their bytes", len(ks))
	}
}

// openAuditorOnly opens an auditor-only provider with a token of the policy
// name (hcl), closed at the end of the test.
func openAuditorOnly(t *testing.T, srv *vaulttest.Server, name, hcl string) *secrets.Vault {
	t.Helper()
	ctx := context.Background()
	tok, err := srv.TokenWithPolicy(ctx, name, hcl)
	if err != nil {
		t.Fatal(err)
	}
	v, err := secrets.OpenVault(ctx, secrets.VaultOptions{Address: srv.Addr, Token: tok, AuditorOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// TestSealedVaultIsNamed: with a Vault timeout shorter than the client's
// default retry wait, a sealed Vault is still reported as sealed (its 503
// answer), not as a timeout, and the provider fails closed.
func TestSealedVaultIsNamed(t *testing.T) {
	srv, p := provisioned(t)
	ctx := context.Background()
	v, _ := openAppRole(t, srv, p, func(o *secrets.VaultOptions) {
		o.RefreshInterval = time.Minute
		o.RequestTimeout = 300 * time.Millisecond
	})
	if err := srv.Root().Sys().SealWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := v.Refresh(ctx); !errors.Is(err, secrets.ErrUnavailable) || !strings.Contains(err.Error(), "Vault is sealed") {
		t.Fatalf("refresh from a sealed Vault: %v", err)
	}
	if _, _, err := v.Sign(ctx, []byte("m")); !errors.Is(err, secrets.ErrUnavailable) || !strings.Contains(err.Error(), "Vault is sealed") {
		t.Fatalf("sign with a sealed Vault: %v", err)
	}
}

// TestSigningKeyMinDecryptionVersionIsNamed: raising the signing key's
// min_decryption_version makes Vault drop the older versions' public keys,
// so what they signed no longer verifies with Vault's keys. The provider
// says so once, naming the versions and the fix, instead of leaving only
// "signature not verified" errors wherever an old checkpoint is checked.
func TestSigningKeyMinDecryptionVersionIsNamed(t *testing.T) {
	srv, p := provisioned(t)
	ctx := context.Background()
	k := p.Layout.SigningKey
	for range 2 {
		if err := srv.RotateTransit(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := srv.Root().Logical().WriteWithContext(ctx, p.Layout.TransitPath("keys", k)+"/config", map[string]any{"min_decryption_version": 3}); err != nil {
		t.Fatal(err)
	}
	v, logs := openAppRole(t, srv, p, func(o *secrets.VaultOptions) { o.RefreshInterval = time.Minute })
	if got := v.SigningVersions(); len(got) != 1 || got[0] != 3 {
		t.Fatalf("signing versions %v; this test shows Vault hides versions 1 and 2", got)
	}
	if err := v.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	l := logs.String()
	if strings.Count(l, "Vault returns no public key for older versions") != 1 || !strings.Contains(l, `"versions":[1,2]`) ||
		!strings.Contains(l, "min_decryption_version=1") {
		t.Fatalf("logs (want the missing versions named once):\n%s", l)
	}
}

// TestRevokedTokenIsNamed: a token Vault no longer accepts (revoked, or
// expired) is reported as such, not as a policy that lacks a rule.
func TestRevokedTokenIsNamed(t *testing.T) {
	srv, p := provisioned(t)
	ctx := context.Background()
	tok, err := srv.TokenWithPolicy(ctx, secrets.PolicyName, secrets.PolicyHCL)
	if err != nil {
		t.Fatal(err)
	}
	v, err := secrets.OpenVault(ctx, secrets.VaultOptions{Address: srv.Addr, Token: tok, RefreshInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if err := srv.Root().Auth().Token().RevokeTreeWithContext(ctx, tok); err != nil {
		t.Fatal(err)
	}
	err = v.Refresh(ctx)
	if !errors.Is(err, secrets.ErrPermission) || !strings.Contains(err.Error(), "no longer accepts the token") || strings.Contains(err.Error(), "policies do not allow") {
		t.Fatalf("refresh with a revoked token: %v", err)
	}
	assertNoCanary(t, "error", err.Error(), canaries([]string{tok, p.SecretID}))
}

// TestBlobKEKMinDecryptionVersionDropsCachedDataKeys: once the blob KEK's
// min_decryption_version is raised past the version a data key was wrapped
// under, the next refresh drops the cached data keys, and unwrapping that
// key fails closed with Vault's reason, not served from the cache for up to
// DataKeyTTL.
func TestBlobKEKMinDecryptionVersionDropsCachedDataKeys(t *testing.T) {
	srv, p := provisioned(t)
	ctx := context.Background()
	v, _ := openAppRole(t, srv, p, func(o *secrets.VaultOptions) { o.RefreshInterval = time.Minute })
	_, wrapped, err := v.NewDataKey(ctx) // cached, wrapped under v1
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.RotateTransit(ctx, p.Layout.BlobKey); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Root().Logical().WriteWithContext(ctx, p.Layout.TransitPath("keys", p.Layout.BlobKey)+"/config", map[string]any{"min_decryption_version": 2}); err != nil {
		t.Fatal(err)
	}
	if err := v.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := v.UnwrapDataKey(ctx, wrapped); !errors.Is(err, secrets.ErrUnavailable) || !strings.Contains(err.Error(), "disallowed by policy") {
		t.Fatalf("unwrap of a v1 data key after min_decryption_version=2: %v", err)
	}
}

// TestVaultAppRoleLoginFailureIsTheStaleCause: when custos can no longer
// log in (the secret id destroyed, used up or expired) and its token then
// expires, the keys go stale; the cause the staleness error carries (the
// refusal log line, the request error's evidence) is the failed login, not
// the expired token's "with AppRole custos logs in again by itself", which
// told the operator to wait for what could not happen.
func TestVaultAppRoleLoginFailureIsTheStaleCause(t *testing.T) {
	srv := vaulttest.Start(t, vaulttest.Options{})
	ctx := context.Background()
	p, err := srv.Provision(ctx, vaulttest.ProvisionOptions{Dir: t.TempDir(), TokenTTL: 2 * time.Second, TokenMaxTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := openAppRole(t, srv, p, func(o *secrets.VaultOptions) {
		o.RefreshInterval = 300 * time.Millisecond
		o.MaxStaleness = 3 * time.Second
	})
	if _, err := srv.Root().Logical().WriteWithContext(ctx, "auth/approle/role/"+vaulttest.RoleName+"/secret-id/destroy",
		map[string]any{"secret_id": p.SecretID}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the keys to go stale", func() bool { return v.Check() != nil })
	err = v.Check()
	if !errors.Is(err, secrets.ErrStale) || !strings.Contains(err.Error(), "log in auth/approle/login") ||
		strings.Contains(err.Error(), "logs in again by itself") {
		t.Fatalf("stale keys after the secret id was destroyed: %v\nwant the failed AppRole login as the cause", err)
	}
	// /readyz shows the class of the cause.
	if se := (*secrets.StaleError)(nil); !errors.As(err, &se) || se.Kind != "custos cannot log in to Vault (AppRole)" {
		t.Errorf("stale error kind: %+v", se)
	}
	assertNoCanary(t, "error", err.Error(), canaries([]string{p.SecretID, p.RoleID}))
}

// TestVaultSignsRightAfterSigningKeyRotation: Transit signs with the newest
// key version at once, but the provider held only the public keys it read
// at its last refresh, so every checkpoint between a rotation and the next
// --key-refresh failed ("no signing key version 2") and was retried until
// then. A signature by a version not held now reads the keys again.
func TestVaultSignsRightAfterSigningKeyRotation(t *testing.T) {
	srv, p := provisioned(t)
	ctx := context.Background()
	v, logs := openAppRole(t, srv, p, func(o *secrets.VaultOptions) { o.RefreshInterval = time.Minute })
	if err := srv.RotateTransit(ctx, p.Layout.SigningKey); err != nil {
		t.Fatal(err)
	}
	// What checkpoint.Signer does: sign, then check the signature under
	// the public key of the version that made it.
	msg := []byte("checkpoint after the rotation")
	sig, ver, err := v.Sign(ctx, msg)
	if err != nil || ver != 2 {
		t.Fatalf("sign after the rotation: version %d, %v", ver, err)
	}
	pub, got, err := v.PublicKey(ver)
	if err != nil || got != 2 || !ed25519.Verify(pub, msg, sig) || !v.Verify(msg, sig, 2) {
		t.Fatalf("public key of the version that signed, before the next refresh: %v", err)
	}
	if !strings.Contains(logs.String(), "signing=transit/custos-audit-signing@2") {
		t.Errorf("the new version is not logged:\n%s", logs.String())
	}
}

// TestVaultDeletedKeyVersionIsNamed: the newest version of a KV key
// deleted (vault kv delete) or destroyed under a serving provider was
// reported as a malformed value ('field "key" must be the base64 of 32
// random bytes'), which sent the operator to write a new value: for the
// resource id key, a rotation that renames every imported resource. The
// refresh error says the version was deleted, with the command that
// restores it, or destroyed; the undeleted version is read again.
func TestVaultDeletedKeyVersionIsNamed(t *testing.T) {
	srv, p := provisioned(t)
	ctx := context.Background()
	v, _ := openAppRole(t, srv, p, func(o *secrets.VaultOptions) { o.RefreshInterval = time.Minute })
	kv := srv.Root().KVv2(p.Layout.KVMount)
	for _, path := range []string{p.Layout.IDKeyPath, p.Layout.CursorKeyPath} {
		if err := kv.Delete(ctx, path); err != nil {
			t.Fatal(err)
		}
		err := v.Refresh(ctx)
		undelete := "vault kv undelete -mount=" + p.Layout.KVMount + " -versions=1 " + path
		if !errors.Is(err, secrets.ErrMissing) || !strings.Contains(err.Error(), "version 1 was deleted") ||
			!strings.Contains(err.Error(), undelete) || strings.Contains(err.Error(), "must be the base64") {
			t.Errorf("refresh with %s version 1 deleted: %v\nwant it named deleted, with %q", path, err, undelete)
		}
		if err := kv.Undelete(ctx, path, []int{1}); err != nil {
			t.Fatal(err)
		}
		if err := v.Refresh(ctx); err != nil {
			t.Errorf("refresh after undelete of %s: %v", path, err)
		}
	}
	if err := kv.Destroy(ctx, p.Layout.IDKeyPath, []int{1}); err != nil {
		t.Fatal(err)
	}
	if err := v.Refresh(ctx); !errors.Is(err, secrets.ErrMissing) || !strings.Contains(err.Error(), "version 1 was destroyed") ||
		strings.Contains(err.Error(), "must be the base64") {
		t.Errorf("refresh with the id key's version 1 destroyed: %v", err)
	}
}

// TestVaultSecretIDFileReadableByOthersIsRefused: an AppRole secret id
// (or the wrapping token that yields one) in a file any local user can
// read lets them log in as custos and read every key. It is refused at
// startup, naming the file and its mode, before Vault is contacted; the
// role id, which is not a secret, and a group-readable secret id (root:custos
// 0440, docs/vault.md) are accepted.
func TestVaultSecretIDFileReadableByOthersIsRefused(t *testing.T) {
	srv, p := provisioned(t)
	ctx := context.Background()
	if err := os.Chmod(p.RoleIDFile, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p.SecretIDFile, 0o440); err != nil {
		t.Fatal(err)
	}
	openAppRole(t, srv, p, nil) // group-readable: accepted
	if err := os.Chmod(p.SecretIDFile, 0o604); err != nil {
		t.Fatal(err)
	}
	v, err := secrets.OpenVault(ctx, secrets.VaultOptions{Address: srv.Addr,
		AppRole: &secrets.AppRole{RoleIDFile: p.RoleIDFile, SecretIDFile: p.SecretIDFile}})
	if err == nil {
		v.Close()
	}
	if !errors.Is(err, secrets.ErrBadConfig) || !strings.Contains(err.Error(), p.SecretIDFile) || !strings.Contains(err.Error(), "-rw----r--") {
		t.Fatalf("secret id file mode 0604: %v, want a configuration error naming the file and its mode", err)
	}
	assertNoCanary(t, "error", err.Error(), canaries([]string{p.SecretID}))
}

// TestVaultRefreshNamesARuleRemovedWhileServing: a rule of policy
// custos-server removed under a serving provider (here Transit decrypt)
// failed only the calls that need it: every read of a payload whose data
// key was not cached failed, while refreshes succeeded and /readyz stayed
// ready, so nothing but the per-read log said the policy was broken. The
// refresh checks the token's capabilities on the Transit paths it does not
// read, and fails naming the rule, as a start does.
func TestVaultRefreshNamesARuleRemovedWhileServing(t *testing.T) {
	srv, p := provisioned(t)
	ctx := context.Background()
	v, _ := openAppRole(t, srv, p, func(o *secrets.VaultOptions) { o.RefreshInterval = time.Minute })
	for _, path := range []string{"transit/decrypt/", "transit/sign/", "transit/datakey/wrapped/"} {
		var weaker []string
		for _, block := range strings.Split(secrets.PolicyHCL, "path ") {
			if !strings.HasPrefix(block, `"`+path) {
				weaker = append(weaker, block)
			}
		}
		if err := srv.Root().Sys().PutPolicyWithContext(ctx, secrets.PolicyName, strings.Join(weaker, "path ")); err != nil {
			t.Fatal(err)
		}
		err := v.Refresh(ctx)
		if !errors.Is(err, secrets.ErrPermission) || !strings.Contains(err.Error(), `path "`+path) || !strings.Contains(err.Error(), `capabilities = ["update"]`) {
			t.Errorf("refresh without the rule for %s: %v, want a permission error naming the rule", path, err)
		}
		if err := srv.Root().Sys().PutPolicyWithContext(ctx, secrets.PolicyName, secrets.PolicyHCL); err != nil {
			t.Fatal(err)
		}
		if err := v.Refresh(ctx); err != nil {
			t.Errorf("refresh with the policy restored: %v", err)
		}
	}
	// A token without Vault's default policy cannot check its own
	// capabilities: that alone does not stop custos; it is logged once.
	if _, err := srv.Root().Logical().WriteWithContext(ctx, "auth/approle/role/"+vaulttest.RoleName,
		map[string]any{"token_no_default_policy": true}); err != nil {
		t.Fatal(err)
	}
	nd, logs := openAppRole(t, srv, p, func(o *secrets.VaultOptions) { o.RefreshInterval = time.Minute })
	if err := nd.Refresh(ctx); err != nil {
		t.Fatalf("refresh with a token without the default policy: %v", err)
	}
	if n := strings.Count(logs.String(), "may not check its own capabilities"); n != 1 {
		t.Errorf("the skipped check is logged %d times:\n%s", n, logs.String())
	}
}

// TestVaultPolicyDenialDoesNotLogInAgain: a refresh that Vault's policy
// denies (a rule removed from custos-server) is not cured by a new token,
// whose policies are the same: custos logged in again at every refresh,
// leaving a new AppRole token in Vault each --key-refresh for as long as
// the rule was missing. Only a token Vault no longer accepts makes it log
// in again.
func TestVaultPolicyDenialDoesNotLogInAgain(t *testing.T) {
	srv, p := provisioned(t)
	ctx := context.Background()
	v, logs := openAppRole(t, srv, p, func(o *secrets.VaultOptions) { o.RefreshInterval = 100 * time.Millisecond })
	var weaker []string
	for _, block := range strings.Split(secrets.PolicyHCL, "path ") {
		if !strings.HasPrefix(block, `"secret/data/custos/cursor-key"`) {
			weaker = append(weaker, block)
		}
	}
	if err := srv.Root().Sys().PutPolicyWithContext(ctx, secrets.PolicyName, strings.Join(weaker, "path ")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "five failed refreshes", func() bool {
		return strings.Count(logs.String(), "vault key refresh failed") >= 5
	})
	if n := v.Logins(); n != 1 {
		t.Errorf("%d AppRole logins while the policy denied a key read, want the first one only", n)
	}
	// A revoked token still makes it log in again.
	n := v.Logins()
	if err := srv.Root().Sys().RevokePrefixWithContext(ctx, "auth/"+vaulttest.AppRoleMount+"/login"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Root().Sys().PutPolicyWithContext(ctx, secrets.PolicyName, secrets.PolicyHCL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a login after the token was revoked, and fresh keys", func() bool {
		return v.Logins() > n && v.Refresh(ctx) == nil
	})
}

// TestConcurrentRefreshKeepsTheNewerState: two refreshes at once (the
// background tick, and a Sign that meets a signing version rotated in since
// the last refresh) each fetched from Vault and stored what they fetched, so
// the slower one, begun before a rotation, stored its older key state over
// the newer one: the rotated key was not used until the next refresh.
// Refreshes now run one at a time. The first refresh here is held between
// its fetch and its store while the cursor key is rotated and a second
// refresh starts; the state held at the end must have the new version.
func TestConcurrentRefreshKeepsTheNewerState(t *testing.T) {
	srv, p := provisioned(t)
	ctx := context.Background()
	v, _ := openAppRole(t, srv, p, func(o *secrets.VaultOptions) { o.RefreshInterval = 10 * time.Minute })
	var calls atomic.Int32
	fetched, second, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	secrets.SetAfterFetch(v, func() {
		switch calls.Add(1) {
		case 1:
			close(fetched)
			<-release
		case 2:
			close(second)
		}
	})
	errA, errB := make(chan error, 1), make(chan error, 1)
	go func() { errA <- v.Refresh(ctx) }()
	<-fetched
	if _, err := srv.RotateKV(ctx, p.Layout.CursorKeyPath, bytes.Repeat([]byte{7}, 32)); err != nil {
		t.Fatal(err)
	}
	go func() { errB <- v.Refresh(ctx) }()
	// Without one refresh at a time, the second fetches and stores while
	// the first is held: wait for it to finish, then let the first store.
	// With it, the second waits for the first; release the first after a
	// while.
	select {
	case <-second:
		if err := <-errB; err != nil {
			t.Fatal(err)
		}
		errB <- nil
	case <-time.After(500 * time.Millisecond):
	}
	close(release)
	for _, ch := range []chan error{errA, errB} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if ids := strings.Join(v.KeyIDs(), " "); !strings.Contains(ids, "cursor=secret/custos/cursor-key@2") {
		t.Fatalf("after two concurrent refreshes, the second begun after the cursor key's rotation, the keys held are %q: the first refresh's older state overwrote the newer", ids)
	}
}
