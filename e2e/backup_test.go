package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/audit/checkpoint"
	"github.com/custos-mcp/custos/backup"
)

// TestBackupUnderLoadAndRestoreDrill is the backup and restore drill of
// docs/operations.md: `custos backup` while go-sdk clients read through a
// running server; the server keeps serving (more records, more
// checkpoints) and stops; the backup restored into a fresh data directory
// with the external anchor is refused as behind the anchors, then restored
// with --accept-rollback, whose record is in the restored log and whose
// acknowledgement is anchored; `audit verify` passes against the anchor;
// serve starts on the restored directory and serves a read. Then the happy
// path: a backup restored before any newer checkpoint needs no
// acknowledgement.
func TestBackupUnderLoadAndRestoreDrill(t *testing.T) {
	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	anchor := t.TempDir()
	tok := newToken(t, d.principal("clinician"), tokens)
	vkeys := filepath.Join(t.TempDir(), "vkeys")
	// --rate-limit 0: the load is one principal reading as fast as it can
	// (as the other readUnderLoad tests run it). With the default 100/s and
	// a burst of 200, the readers were refused 429 whenever the backup took
	// more than about two seconds, and the test timed out waiting for
	// reads (a fresh-clone CI run, under load).
	args := []string{"--dev", "--listen", loopback, "--tokens", tokens, "--anchor-dir", anchor, "--checkpoint-interval", "50ms", "--node", "e2e", "--rate-limit", "0"}

	s := serve(t, d, nil, args...)
	mustCustos(t, "audit", "pubkey", "--data-dir", d.data, "--dev", "--origin", "custos.local/e2e/audit", "-o", vkeys)
	reads, stopLoad := readUnderLoad(t, s.url, tok, 3)
	waitFor(t, func() bool { return reads.Load() >= 30 })

	bdir := filepath.Join(t.TempDir(), "backup")
	out := mustCustos(t, "backup", "--data-dir", d.data, "--out", bdir, "--purpose", "HOPERAT", "--by", "e2e-operator", "--pubkey", vkeys)
	if !strings.Contains(out, "OK: backup written") || !strings.Contains(out, "signature verified") {
		t.Fatalf("backup:\n%s", out)
	}
	m, err := backup.ReadManifest(bdir)
	if err != nil {
		t.Fatal(err)
	}
	// Restore refuses while the server holds the data directory.
	if _, stderr, code := custos(t, nil, "restore", "--from", bdir, "--data-dir", d.data, "--force", "--pubkey", vkeys); code == 0 || !strings.Contains(stderr, "in use") && !strings.Contains(stderr, "server answers") {
		t.Fatalf("restore onto a served directory: exit %d\n%s", code, stderr)
	}
	// Keep serving: more records, more checkpoints.
	after := reads.Load()
	waitFor(t, func() bool { return reads.Load() >= after+30 })
	stopLoad()
	if err := s.stop(t); err != nil {
		t.Fatalf("serve: %v\n%s", err, s.stderr)
	}
	latest, ok, err := (&checkpoint.Anchor{Dir: anchor}).Latest()
	if err != nil || !ok || latest.Size <= int64(m.Audit.HeadSeq) {
		t.Fatalf("anchor latest %d (%v %v), backup head %d: want a newer checkpoint", latest.Size, ok, err, m.Audit.HeadSeq)
	}

	// Behind the anchor: refused, nothing written.
	fresh := filepath.Join(t.TempDir(), "restored")
	audittest.VerifyOnCleanup(t, filepath.Join(fresh, "audit.db"))
	_, stderr, code := custos(t, nil, "restore", "--from", bdir, "--data-dir", fresh, "--anchor-dir", anchor, "--pubkey", vkeys)
	if code == 0 || !strings.Contains(stderr, "behind an anchored checkpoint") || !strings.Contains(stderr, "--accept-rollback") {
		t.Fatalf("restore of a backup behind the anchor: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Fatalf("a refused restore left %s: %v", fresh, err)
	}

	// Acknowledged: restored, recorded, anchored.
	out = mustCustos(t, "restore", "--from", bdir, "--data-dir", fresh, "--anchor-dir", anchor, "--dev", "--accept-rollback", "e2e drill: disk lost")
	if !strings.Contains(out, "ROLLBACK ACKNOWLEDGED") {
		t.Fatalf("restore --accept-rollback:\n%s", out)
	}
	ack, ok, err := (&checkpoint.Anchor{Dir: anchor}).Latest()
	if err != nil || !ok || ack.Rollback == nil || ack.Size != int64(m.Audit.HeadSeq)+1 || ack.Rollback.Behind != latest.Size {
		t.Fatalf("anchored acknowledgement %+v (%v), want size %d behind %d", ack, err, m.Audit.HeadSeq+1, latest.Size)
	}
	l, err := audit.Open(filepath.Join(fresh, "audit.db"), audit.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	l.Records(context.Background(), m.Audit.HeadSeq+1, m.Audit.HeadSeq+1, func(_ uint64, c []byte) error {
		r, err := audit.Decode(c)
		if err != nil || r.Action != backup.ActionRestore || r.Hash != ack.Rollback.Record ||
			!strings.Contains(r.Reason, `accept_rollback="e2e drill: disk lost"`) || !strings.Contains(r.Reason, "behind=") || !strings.HasPrefix(r.Principal.Sub, "os:uid=") {
			t.Errorf("restore record %+v (%v)", r, err)
		}
		return nil
	})
	l.Close()
	if out := mustCustos(t, "audit", "verify", "--data-dir", fresh, "--anchor-dir", anchor, "--pubkey", vkeys); !strings.Contains(out, "OK: consistent with") {
		t.Fatalf("verify of the restored log:\n%s", out)
	}
	restored := *d
	restored.data = fresh
	s2 := serve(t, &restored, nil, args...)
	cs := connect(t, s2.url, tok)
	page, err := cs.ListResources(context.Background(), nil)
	if err != nil || len(page.Resources) == 0 {
		t.Fatalf("list on the restored directory: %v", err)
	}
	if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: page.Resources[0].URI}); err != nil {
		t.Fatalf("read on the restored directory: %v", err)
	}
	cs.Close()
	if err := s2.stop(t); err != nil {
		t.Fatalf("serve on the restored directory: %v\n%s", err, s2.stderr)
	}

	// The happy path: a backup of the stopped server, restored before any
	// newer checkpoint, is not behind.
	b2 := filepath.Join(t.TempDir(), "backup2")
	mustCustos(t, "backup", "--data-dir", fresh, "--out", b2, "--purpose", "HOPERAT")
	fresh2 := filepath.Join(t.TempDir(), "restored2")
	audittest.VerifyOnCleanup(t, filepath.Join(fresh2, "audit.db"))
	out = mustCustos(t, "restore", "--from", b2, "--data-dir", fresh2, "--anchor-dir", anchor, "--pubkey", vkeys)
	if strings.Contains(out, "ROLLBACK") || !strings.Contains(out, "OK: restored") {
		t.Fatalf("restore of a current backup:\n%s", out)
	}
	if out := mustCustos(t, "audit", "verify", "--data-dir", fresh2, "--anchor-dir", anchor, "--pubkey", vkeys); !strings.Contains(out, "OK: consistent with") {
		t.Fatalf("verify of the second restored log:\n%s", out)
	}
	// Never over a data directory without --force.
	if _, stderr, code := custos(t, nil, "restore", "--from", b2, "--data-dir", fresh2, "--anchor-dir", anchor, "--pubkey", vkeys); code == 0 || !strings.Contains(stderr, "--force") {
		t.Fatalf("restore over a data directory: exit %d\n%s", code, stderr)
	}
}
