package vaulttest_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/secrets/vaulttest"
	"github.com/hashicorp/vault/api"
	"github.com/hashicorp/vault/api/auth/approle"
)

// canary returns a recognizable KeySize-byte key.
func canary(b byte) []byte { return bytes.Repeat([]byte{b}, secrets.KeySize) }

// login logs in as the AppRole and returns a client holding its token.
func login(t *testing.T, s *vaulttest.Server, roleID string, secretID *approle.SecretID, opts ...approle.LoginOption) (*api.Client, *api.Secret, error) {
	t.Helper()
	c, err := s.Client("")
	if err != nil {
		t.Fatal(err)
	}
	a, err := approle.NewAppRoleAuth(roleID, secretID, opts...)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := c.Auth().Login(t.Context(), a)
	return c, sec, err
}

func isDenied(err error) bool {
	var re *api.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusForbidden
}

func kvKey(t *testing.T, sec *api.KVSecret) []byte {
	t.Helper()
	v, ok := sec.Data[secrets.KVField].(string)
	if !ok {
		t.Fatalf("KV secret has no string field %q", secrets.KVField)
	}
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		t.Fatalf("KV field is not base64: %v", err)
	}
	return b
}

func str(t *testing.T, sec *api.Secret, err error, field string) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if sec == nil {
		t.Fatalf("empty response, want %s", field)
	}
	v, ok := sec.Data[field].(string)
	if !ok || v == "" {
		t.Fatalf("response has no %s", field)
	}
	return v
}

// TestProvisionedPolicy provisions a real Vault and checks, as the AppRole
// custos logs in as, that secrets.PolicyHCL grants every operation custos
// performs and denies the ones it must not.
func TestProvisionedPolicy(t *testing.T) {
	s := vaulttest.Start(t, vaulttest.Options{})
	ctx := t.Context()
	dir := t.TempDir()
	cursorKey, auditKey := canary(0xC1), canary(0xA1)
	p, err := s.Provision(ctx, vaulttest.ProvisionOptions{
		Dir: dir, CursorKey: cursorKey, AuditKey: auditKey,
		TokenTTL: 10 * time.Minute, WrapSecretID: true,
	})
	if err != nil {
		t.Fatalf("Provision: %v", err)
	}
	l := p.Layout
	if l != secrets.DefaultLayout {
		t.Fatalf("Layout = %+v, want DefaultLayout", l)
	}
	if !bytes.Equal(p.CursorKey, cursorKey) || !bytes.Equal(p.AuditKey, auditKey) {
		t.Fatal("Provisioned keys differ from the canaries supplied")
	}
	for path, want := range map[string]string{p.RoleIDFile: p.RoleID, p.SecretIDFile: p.SecretID} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", path, fi.Mode().Perm())
		}
		if b, _ := os.ReadFile(path); string(b) != want || want == "" {
			t.Errorf("%s does not hold the provisioned value", path)
		}
	}

	// Log in the way custos does: role id from its file, secret id from its file.
	roleID, err := os.ReadFile(p.RoleIDFile)
	if err != nil {
		t.Fatal(err)
	}
	app, auth, err := login(t, s, string(roleID), &approle.SecretID{FromFile: p.SecretIDFile})
	if err != nil {
		t.Fatalf("AppRole login: %v", err)
	}
	if !slices.Contains(auth.Auth.Policies, secrets.PolicyName) {
		t.Fatalf("login policies %v lack %s", auth.Auth.Policies, secrets.PolicyName)
	}
	if auth.Auth.LeaseDuration != int((10 * time.Minute).Seconds()) {
		t.Fatalf("token TTL %ds, want TokenTTL 600s", auth.Auth.LeaseDuration)
	}
	root := s.Root()
	if _, err := root.KVv2(l.KVMount).Put(ctx, "custos-other/key", map[string]any{secrets.KVField: "eA=="}); err != nil {
		t.Fatal(err)
	}
	kv := app.KVv2(l.KVMount)
	tr := app.Logical()

	t.Run("kv read", func(t *testing.T) {
		for path, want := range map[string][]byte{l.CursorKeyPath: cursorKey, l.AuditKeyPath: auditKey} {
			sec, err := kv.Get(ctx, path)
			if err != nil {
				t.Fatalf("read %s: %v", path, err)
			}
			if got := kvKey(t, sec); !bytes.Equal(got, want) {
				t.Fatalf("read %s: wrong key bytes", path)
			}
			if sec.VersionMetadata.Version != 1 {
				t.Fatalf("read %s: version %d, want 1", path, sec.VersionMetadata.Version)
			}
		}
	})

	t.Run("transit sign verify ed25519", func(t *testing.T) {
		sec, err := tr.ReadWithContext(ctx, l.TransitMount+"/keys/"+l.SigningKey)
		if err != nil {
			t.Fatal(err)
		}
		if sec.Data["type"] != "ed25519" || sec.Data["exportable"] != false {
			t.Fatalf("signing key type %v exportable %v", sec.Data["type"], sec.Data["exportable"])
		}
		v1, _ := sec.Data["keys"].(map[string]any)["1"].(map[string]any)
		pub, err := base64.StdEncoding.DecodeString(fmt.Sprint(v1["public_key"]))
		if err != nil || len(pub) != ed25519.PublicKeySize {
			t.Fatalf("public key: %v (%d bytes)", err, len(pub))
		}
		msg := []byte("checkpoint 42")
		in := base64.StdEncoding.EncodeToString(msg)
		sec, err = tr.WriteWithContext(ctx, l.TransitPath("sign", l.SigningKey), map[string]any{"input": in})
		sig := str(t, sec, err, "signature")
		raw, ok := strings.CutPrefix(sig, "vault:v1:")
		if !ok {
			t.Fatalf("signature %q lacks vault:v1: prefix", sig)
		}
		rawSig, err := base64.StdEncoding.DecodeString(raw)
		if err != nil || !ed25519.Verify(pub, msg, rawSig) {
			t.Fatalf("signature does not verify under the public key (%v)", err)
		}
		// custos verifies locally with the public key; Vault's own verify
		// agrees (asked with the root token: custos-server has no verify).
		for _, tc := range []struct {
			input string
			valid bool
		}{{in, true}, {base64.StdEncoding.EncodeToString([]byte("checkpoint 43")), false}} {
			sec, err := s.Root().Logical().WriteWithContext(ctx, l.TransitPath("verify", l.SigningKey), map[string]any{"input": tc.input, "signature": sig})
			if err != nil {
				t.Fatal(err)
			}
			if sec.Data["valid"] != tc.valid {
				t.Fatalf("verify = %v, want %v", sec.Data["valid"], tc.valid)
			}
		}
	})

	t.Run("transit envelope", func(t *testing.T) {
		if _, err := tr.ReadWithContext(ctx, l.TransitMount+"/keys/"+l.BlobKey); err != nil {
			t.Fatalf("read blob key: %v", err)
		}
		sec, err := tr.WriteWithContext(ctx, l.TransitPath("datakey/wrapped", l.BlobKey), map[string]any{"bits": 256})
		ct := str(t, sec, err, "ciphertext")
		if _, leaked := sec.Data["plaintext"]; leaked {
			t.Fatal("wrapped datakey response carries the plaintext")
		}
		decrypt := func(ct string) []byte {
			t.Helper()
			sec, err := tr.WriteWithContext(ctx, l.TransitPath("decrypt", l.BlobKey), map[string]any{"ciphertext": ct})
			pt, err := base64.StdEncoding.DecodeString(str(t, sec, err, "plaintext"))
			if err != nil || len(pt) != 32 {
				t.Fatalf("decrypted data key: %v, %d bytes", err, len(pt))
			}
			return pt
		}
		dk := decrypt(ct)
		if err := s.RotateTransit(ctx, l.BlobKey); err != nil {
			t.Fatal(err)
		}
		sec, err = tr.WriteWithContext(ctx, l.TransitPath("rewrap", l.BlobKey), map[string]any{"ciphertext": ct})
		ct2 := str(t, sec, err, "ciphertext")
		if !strings.HasPrefix(ct2, "vault:v2:") {
			t.Fatalf("rewrapped ciphertext %.9q, want vault:v2: after rotation", ct2)
		}
		if !bytes.Equal(decrypt(ct2), dk) {
			t.Fatal("rewrapped data key decrypts to different bytes")
		}
	})

	t.Run("denied", func(t *testing.T) {
		pt := map[string]any{"plaintext": "eA=="}
		for _, tc := range []struct {
			name string
			op   func() error
		}{
			{"kv write cursor key", func() error {
				_, err := kv.Put(ctx, l.CursorKeyPath, map[string]any{secrets.KVField: "eA=="})
				return err
			}},
			{"kv delete audit key", func() error { return kv.Delete(ctx, l.AuditKeyPath) }},
			{"kv read metadata", func() error { _, err := kv.GetMetadata(ctx, l.CursorKeyPath); return err }},
			{"kv read other path", func() error { _, err := kv.Get(ctx, "custos-other/key"); return err }},
			{"kv list", func() error { _, err := tr.ListWithContext(ctx, l.KVMount+"/metadata/custos"); return err }},
			{"transit rotate signing key", func() error {
				_, err := tr.WriteWithContext(ctx, l.TransitMount+"/keys/"+l.SigningKey+"/rotate", nil)
				return err
			}},
			{"transit rotate blob key", func() error {
				_, err := tr.WriteWithContext(ctx, l.TransitMount+"/keys/"+l.BlobKey+"/rotate", nil)
				return err
			}},
			{"transit export signing key", func() error {
				_, err := tr.ReadWithContext(ctx, l.TransitMount+"/export/signing-key/"+l.SigningKey)
				return err
			}},
			{"transit export blob key", func() error {
				_, err := tr.ReadWithContext(ctx, l.TransitMount+"/export/encryption-key/"+l.BlobKey)
				return err
			}},
			{"transit backup", func() error {
				_, err := tr.ReadWithContext(ctx, l.TransitMount+"/backup/"+l.BlobKey)
				return err
			}},
			{"transit key config", func() error {
				_, err := tr.WriteWithContext(ctx, l.TransitMount+"/keys/"+l.SigningKey+"/config", map[string]any{"exportable": true})
				return err
			}},
			{"transit create key", func() error {
				_, err := tr.WriteWithContext(ctx, l.TransitMount+"/keys/evil", map[string]any{"type": "ed25519"})
				return err
			}},
			{"transit sign with the policy key (the security team signs)", func() error {
				_, err := tr.WriteWithContext(ctx, l.TransitPath("sign", l.PolicyKey), map[string]any{"input": "eA=="})
				return err
			}},
			{"transit rotate the FHIR client key", func() error {
				_, err := tr.WriteWithContext(ctx, l.TransitMount+"/keys/"+l.FHIRClientKey+"/rotate", nil)
				return err
			}},
			{"transit export the FHIR client key", func() error {
				_, err := tr.ReadWithContext(ctx, l.TransitMount+"/export/signing-key/"+l.FHIRClientKey)
				return err
			}},
			{"transit verify (custos verifies locally)", func() error {
				_, err := tr.WriteWithContext(ctx, l.TransitPath("verify", l.SigningKey), map[string]any{"input": "eA==", "signature": "vault:v1:AAAA"})
				return err
			}},
			{"transit plaintext datakey", func() error {
				_, err := tr.WriteWithContext(ctx, l.TransitPath("datakey/plaintext", l.BlobKey), nil)
				return err
			}},
			{"transit encrypt", func() error {
				_, err := tr.WriteWithContext(ctx, l.TransitPath("encrypt", l.BlobKey), pt)
				return err
			}},
			{"transit sign with blob key", func() error {
				_, err := tr.WriteWithContext(ctx, l.TransitPath("sign", l.BlobKey), map[string]any{"input": "eA=="})
				return err
			}},
			{"policy write", func() error {
				return app.Sys().PutPolicyWithContext(ctx, secrets.PolicyName, `path "*" { capabilities = ["sudo"] }`)
			}},
			{"mint secret id", func() error {
				_, err := tr.WriteWithContext(ctx, "auth/"+vaulttest.AppRoleMount+"/role/"+vaulttest.RoleName+"/secret-id", nil)
				return err
			}},
			{"mount engine", func() error { return app.Sys().MountWithContext(ctx, "evil", &api.MountInput{Type: "kv"}) }},
			{"create token", func() error {
				_, err := app.Auth().Token().CreateWithContext(ctx, &api.TokenCreateRequest{Policies: []string{secrets.PolicyName}})
				return err
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if err := tc.op(); !isDenied(err) {
					t.Fatalf("got %v, want 403 permission denied", err)
				}
			})
		}
	})

	t.Run("wrapped secret id unwraps once", func(t *testing.T) {
		if p.WrappedSecretID == "" {
			t.Fatal("no WrappedSecretID although WrapSecretID was set")
		}
		sid := &approle.SecretID{FromString: p.WrappedSecretID}
		if _, _, err := login(t, s, p.RoleID, sid, approle.WithWrappingToken()); err != nil {
			t.Fatalf("login with wrapped secret id: %v", err)
		}
		if _, _, err := login(t, s, p.RoleID, sid, approle.WithWrappingToken()); err == nil {
			t.Fatal("second unwrap of the wrapping token succeeded")
		}
		if _, _, err := login(t, s, p.RoleID, &approle.SecretID{FromString: "00000000-0000-0000-0000-000000000000"}); err == nil {
			t.Fatal("login with an unknown secret id succeeded")
		}
	})

	t.Run("service token", func(t *testing.T) {
		c, err := s.Client(p.Token)
		if err != nil {
			t.Fatal(err)
		}
		sec, err := c.KVv2(l.KVMount).Get(ctx, l.AuditKeyPath)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(kvKey(t, sec), auditKey) {
			t.Fatal("wrong audit key via service token")
		}
		if _, err := c.KVv2(l.KVMount).Put(ctx, l.AuditKeyPath, map[string]any{"x": "y"}); !isDenied(err) {
			t.Fatalf("service token KV write: %v, want 403", err)
		}
	})

	t.Run("token with policy", func(t *testing.T) {
		tok, err := s.TokenWithPolicy(ctx, "cursor-only", `path "`+l.KVDataPath(l.CursorKeyPath)+`" { capabilities = ["read"] }`)
		if err != nil {
			t.Fatal(err)
		}
		c, err := s.Client(tok)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.KVv2(l.KVMount).Get(ctx, l.CursorKeyPath); err != nil {
			t.Fatalf("granted read: %v", err)
		}
		if _, err := c.KVv2(l.KVMount).Get(ctx, l.AuditKeyPath); !isDenied(err) {
			t.Fatalf("ungranted read: %v, want 403", err)
		}
	})

	t.Run("rotate kv", func(t *testing.T) {
		newKey := canary(0xC2)
		v, err := s.RotateKV(ctx, l.CursorKeyPath, newKey)
		if err != nil || v != 2 {
			t.Fatalf("RotateKV = %d, %v; want version 2", v, err)
		}
		for _, tc := range []struct {
			version int
			want    []byte
		}{{0, newKey}, {2, newKey}, {1, cursorKey}} {
			var sec *api.KVSecret
			if tc.version == 0 {
				sec, err = kv.Get(ctx, l.CursorKeyPath)
			} else {
				sec, err = kv.GetVersion(ctx, l.CursorKeyPath, tc.version)
			}
			if err != nil {
				t.Fatalf("version %d: %v", tc.version, err)
			}
			if !bytes.Equal(kvKey(t, sec), tc.want) {
				t.Fatalf("version %d: wrong key bytes", tc.version)
			}
		}
		v, err = s.PutKV(ctx, l.AuditKeyPath, map[string]any{"other": "field"})
		if err != nil || v != 2 {
			t.Fatalf("PutKV = %d, %v; want version 2", v, err)
		}
		sec, err := kv.Get(ctx, l.AuditKeyPath)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := sec.Data[secrets.KVField]; ok {
			t.Fatal("PutKV did not store the data verbatim")
		}
	})
}

// TestPauseResumeStop checks the outage controls against a real server.
//
// Under -race (tools/racetests): the server's output is read on its own goroutine while the test stops and resumes it.
//
//custos:race
func TestPauseResumeStop(t *testing.T) {
	s := vaulttest.Start(t, vaulttest.Options{})
	c := s.Root()
	c.SetMaxRetries(0)
	c.SetClientTimeout(500 * time.Millisecond)
	health := func() error { _, err := c.Sys().HealthWithContext(context.Background()); return err }
	if err := health(); err != nil {
		t.Fatalf("before pause: %v", err)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := health(); err == nil {
		t.Fatal("request to a paused server succeeded")
	} else if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("paused: %v, want a timeout", err)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := health(); err != nil {
		t.Fatalf("after resume: %v", err)
	}
	// Stop must work on a paused server and leave nothing running.
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop of a paused server: %v", err)
	}
	if !s.Exited() {
		t.Fatal("process still running after Stop")
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := s.Pause(); !errors.Is(err, vaulttest.ErrNotRunning) {
		t.Fatalf("Pause after Stop = %v, want ErrNotRunning", err)
	}
	if err := health(); err == nil {
		t.Fatal("stopped server still answers")
	}
	// The dev banner prints the root token and unseal key; LogTail hides them.
	raw, err := os.ReadFile(s.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(s.RootToken)) || !bytes.Contains(raw, []byte("Unseal Key:")) {
		t.Fatalf("dev banner not in log; log:\n%s", s.LogTail())
	}
	tail := s.LogTail()
	if strings.Contains(tail, s.RootToken) || strings.Contains(tail, "Unseal Key:") != strings.Contains(tail, "Unseal Key: [redacted]") {
		t.Fatalf("LogTail does not redact the dev banner:\n%s", tail)
	}
}
