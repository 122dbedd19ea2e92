package app_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/audit/checkpoint"
	"github.com/custos-mcp/custos/secrets"
)

// TestAnotherNodeIsToldBothOrigins: a data directory served under one
// --node and started again under another (a restore drill on a spare
// machine whose hostname, the default --node, differs) is refused, since
// its anchored checkpoints are signed under the old origin; the refusal
// names both origins, the anchored one and this server's, so the operator
// sees that --node (or --deployment) is the fix. Before, it said only
// "note has no verifiable signatures".
func TestAnotherNodeIsToldBothOrigins(t *testing.T) {
	f := newFixture(t)
	o := integrityOptions(t, f)
	serveReads(t, o, 1)

	o.Node = "spare"
	a, err := app.Open(context.Background(), o)
	if err == nil {
		a.Close()
		t.Fatal("Open served a log anchored under another origin")
	}
	if !errors.Is(err, checkpoint.ErrBadSignature) {
		t.Fatalf("Open = %v, want ErrBadSignature", err)
	}
	for _, want := range []string{`"custos.local/test/audit"`, `"custos.local/spare/audit"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open = %q; does not name %s", err, want)
		}
	}
	t.Logf("refusal: %v", err)
}

// TestKeyMismatchLeadsWithTheKeys: a log whose latest anchored checkpoint
// is signed by a key this server does not have (its signing key replaced:
// here the dev key file; in production a Vault key trimmed or another
// Vault) is refused, leading with the key mismatch, which key signed and
// which keys this server has, and the fix. It led with "the audit log does
// not match its anchored checkpoints", which an operator reads as
// tampering. A fork, checkpoint signed by this server's own key, still
// says the log does not match.
func TestKeyMismatchLeadsWithTheKeys(t *testing.T) {
	ctx := context.Background()
	const origin = "custos.local/test/audit"
	const lead = "refusing to serve: the latest anchored checkpoint is signed by a key this server does not have: "
	f := newFixture(t)
	o := integrityOptions(t, f)
	serveReads(t, o, 1)
	oldKey := devKeyName(t, f.data, origin)

	// The other node of TestAnotherNodeIsToldBothOrigins, and a replaced key.
	other := o
	other.Node = "spare"
	_, err := app.Open(ctx, other)
	if err == nil || !strings.HasPrefix(err.Error(), lead) || strings.Contains(err.Error(), "does not match") {
		t.Errorf("Open under another node = %v\nwant it to lead with %q, not say the log does not match", err, lead)
	}
	keyFile := filepath.Join(f.data, secrets.DevKeyFile)
	saved, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	a, err := app.Open(ctx, o) // a new dev key
	if err == nil {
		a.Close()
		t.Fatal("Open served a log anchored by another key")
	}
	newKey := devKeyName(t, f.data, origin)
	if !errors.Is(err, checkpoint.ErrUnknownKey) || !strings.HasPrefix(err.Error(), lead) || strings.Contains(err.Error(), "does not match") ||
		!strings.Contains(err.Error(), `signed by "`+oldKey+`"`) || !strings.Contains(err.Error(), `has the keys "`+newKey+`"`) {
		t.Errorf("Open with another signing key = %v\nwant it to lead with %q, naming the key that signed (%s) and this server's (%s)", err, lead, oldKey, newKey)
	}

	// The right key again, and a fork signed by it.
	if err := os.WriteFile(keyFile, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.NewDev()
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.PersistIn(f.data); err != nil {
		t.Fatal(err)
	}
	signer, _, err := checkpoint.NewSigner(ctx, origin, keys)
	if err != nil {
		t.Fatal(err)
	}
	anchor := &checkpoint.Anchor{Dir: f.data}
	latest, _, err := anchor.Latest()
	if err != nil {
		t.Fatal(err)
	}
	forked := checkpoint.Checkpoint{Origin: origin, Size: latest.Size, Root: tlog.Hash{1}}
	msg, err := checkpoint.Sign(forked, signer)
	if err != nil {
		t.Fatal(err)
	}
	if err := anchor.Append(ctx, msg, forked, time.Now()); err != nil {
		t.Fatal(err)
	}
	_, err = app.Open(ctx, o)
	if !errors.Is(err, checkpoint.ErrFork) || !strings.HasPrefix(err.Error(), "the audit log does not match its anchored checkpoints; refusing to serve") {
		t.Errorf("Open of a forked log = %v, want it to say the log does not match its anchored checkpoints", err)
	}
}

// devKeyName is the name ("origin+hash") of the verifier key of the dev
// signing key in dir.
func devKeyName(t *testing.T, dir, origin string) string {
	t.Helper()
	keys, err := secrets.NewDev()
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.PersistIn(dir); err != nil {
		t.Fatal(err)
	}
	_, vkey, err := checkpoint.NewSigner(context.Background(), origin, keys)
	if err != nil {
		t.Fatal(err)
	}
	return checkpoint.VerifierKeyName(vkey)
}
