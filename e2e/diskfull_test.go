package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/internal/tmpfstest"
)

// A full disk, made real: the directories under test are on a small tmpfs
// (internal/tmpfstest: root only; without it these tests fail under
// CI=true and are skipped otherwise) that a filler file fills up.

// TestFullAnchorVolumeLeavesNoTornCheckpoint fills the external anchor's
// volume while serve appends a checkpoint to it, at a moment when the
// line's first bytes still fit in the file's last page: the write stops
// part way (ENOSPC). Reads go on (the audit log has room); once space is
// freed, checkpoints must be anchored again, the server must stop cleanly
// (its shutdown checkpoint) and start again on the same anchor. Before
// the fix the partial line stayed: every later checkpoint was refused
// ("torn anchor file"), serve exited 1 at shutdown and refused to start
// until an operator cut the file by hand.
func TestFullAnchorVolumeLeavesNoTornCheckpoint(t *testing.T) {
	anchor := filepath.Join(tmpfstest.Mount(t, 1<<20), "anchor")
	if err := os.Mkdir(anchor, 0o700); err != nil {
		t.Fatal(err)
	}
	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, d.principal("clinician"), tokens)
	args := []string{"--dev", "--listen", loopback, "--tokens", tokens, "--anchor-dir", anchor, "--checkpoint-every", "1", "--node", "e2e"}
	srv := serve(t, d, nil, args...)
	cs := connect(t, srv.url, tok)
	ctx := context.Background()
	page, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	uri := page.Resources[0].URI
	file := filepath.Join(anchor, "checkpoints.jsonl")

	// read reads uri and waits for its checkpoint to reach the anchor
	// (grow), or for the anchor to stop growing for 3 s (!grow).
	size := func() int64 {
		fi, err := os.Stat(file)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	read := func(grow bool) {
		t.Helper()
		before := size()
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err != nil {
			t.Fatalf("read: %v", err)
		}
		deadline := time.Now().Add(10 * time.Second)
		if !grow {
			deadline = time.Now().Add(3 * time.Second)
		}
		for size() == before && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if grow && size() == before {
			t.Fatalf("no checkpoint anchored within 10 s of a read:\n%s", srv.stderr)
		}
	}
	lastLine := func() int {
		b, _ := os.ReadFile(file)
		b = bytes.TrimSuffix(b, []byte("\n"))
		return len(b) - bytes.LastIndexByte(b, '\n')
	}
	// Read until the next line surely crosses into a new page (lines
	// differ by a few bytes: the size's digits, the time's fraction).
	const pageSize = 4096
	for i := 0; ; i++ {
		if s := size(); s%pageSize != 0 && s%pageSize+int64(lastLine())-16 > pageSize {
			break
		}
		if i == 200 {
			t.Fatalf("the anchor file never came near a page's end: %d bytes", size())
		}
		read(true)
	}
	full := size()
	filler := tmpfstest.Fill(t, anchor, 0)
	read(false)
	if !within(10*time.Second, func() bool { return strings.Contains(srv.stderr.String(), "no space left on device") }) {
		t.Fatalf("serve never reported the full anchor volume:\n%s", srv.stderr)
	}
	if got := size(); got != full {
		t.Errorf("after the failed checkpoint the anchor holds %d bytes, want the %d it held (no partial line)", got, full)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	read(true)
	if logs := srv.stderr.String(); strings.Contains(logs, "torn anchor file") {
		t.Errorf("serve found a torn anchor file after the disk was full:\n%s", logs)
	}
	if err := srv.stop(t); err != nil {
		t.Fatalf("serve exited with %v after the anchor volume was full and freed:\n%s", err, srv.stderr)
	}
	again := serve(t, d, nil, args...)
	if err := again.stop(t); err != nil {
		t.Fatalf("serve on the same anchor exited with %v:\n%s", err, again.stderr)
	}
	vkeys := filepath.Join(t.TempDir(), "vkeys")
	mustCustos(t, "audit", "pubkey", "--data-dir", d.data, "--dev", "--origin", "custos.local/e2e/audit", "-o", vkeys)
	if out := mustCustos(t, "audit", "verify", "--data-dir", d.data, "--anchor-dir", anchor, "--pubkey", vkeys, "--purpose", "HSYSADMIN"); !strings.Contains(out, "OK: consistent with") {
		t.Fatalf("verify --anchor-dir: %s", out)
	}
}

// within polls cond every 20 ms for up to d and reports whether it held.
func within(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// TestFullDataVolumeRefusesAndRecovers fills the volume of the data
// directory (audit.db, catalog.db) while serve runs: docs/operations.md,
// "Failure behaviour", first row. Every read and list must be refused
// with one of the documented errors, nothing released; /readyz must name
// the disk; once space is freed, reads are served again without a
// restart, the server stops cleanly and the audit log verifies (the
// fixture's check when the test ends).
func TestFullDataVolumeRefusesAndRecovers(t *testing.T) {
	mnt := tmpfstest.Mount(t, 32<<20)
	d := &dataset{seed: filepath.Join(t.TempDir(), "synthetic"), data: filepath.Join(mnt, "data")}
	audittest.VerifyOnCleanup(t, d.audit())
	mustCustos(t, "seed", "--out", d.seed, "--patients", "12", "--seed", "3")
	mustCustos(t, "import", "--data-dir", d.data, d.seed)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, d.principal("clinician"), tokens)
	opsFile := filepath.Join(t.TempDir(), "ops")
	// The smallest reserve: requests are admitted until the disk is
	// really full, so that appends meet ENOSPC.
	srv := serve(t, d, nil, "--dev", "--listen", loopback, "--tokens", tokens, "--ops-listen", loopback, "--ops-addr-file", opsFile,
		"--audit-disk-low-watermark", "1", "--audit-disk-reserve", "1")
	opsURL := srv.waitAddr(t, opsFile)
	cs := connect(t, srv.url, tok)
	ctx := context.Background()
	page, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	uri := page.Resources[0].URI

	filler := tmpfstest.Fill(t, mnt, 0)
	refused := func(what string, err error) {
		t.Helper()
		je := rpcError(err)
		if je == nil || je.Code != -32603 || (je.Message != "audit log unavailable: request refused, nothing released" && je.Message != "audit volume low: request refused, nothing released") {
			t.Fatalf("%s on a full disk: %v; want -32603 audit log unavailable or audit volume low, nothing released", what, err)
		}
	}
	// Until the free-space sample sees the full disk, an append may still
	// find room in pages audit.db freed before; the sample comes within 5 s.
	if !within(10*time.Second, func() bool {
		code, body := httpGet(t, opsURL+"/readyz")
		return code == 503 && strings.Contains(body, `"disk":"audit volume in reserve: requests refused"`)
	}) {
		t.Fatalf("/readyz never named the full disk:\n%s", srv.stderr)
	}
	if _, m := httpGet(t, opsURL+"/metrics"); !strings.Contains(m, "custos_audit_disk_free_bytes 0\n") || !strings.Contains(m, "custos_audit_volume_low 1\n") {
		t.Errorf("/metrics does not show the full disk")
	}
	if code, _ := httpGet(t, opsURL+"/healthz"); code != 200 {
		t.Errorf("/healthz: %d, want 200 (the process answers)", code)
	}
	for i := 0; i < 20; i++ {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if res != nil {
			t.Fatalf("read %d on a full disk released %d contents", i, len(res.Contents))
		}
		refused("read", err)
		lp, err := cs.ListResources(ctx, nil)
		if lp != nil {
			t.Fatalf("list %d on a full disk released %d resources", i, len(lp.Resources))
		}
		refused("list", err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if !within(10*time.Second, func() bool {
		_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		return err == nil
	}) {
		t.Fatalf("reads not served again within 10 s of freeing the disk:\n%s", srv.stderr)
	}
	if code, body := httpGet(t, opsURL+"/readyz"); code != 200 {
		t.Errorf("/readyz after freeing the disk: %d %s", code, body)
	}
	if err := srv.stop(t); err != nil {
		t.Fatalf("serve exited with %v after the disk was full and freed:\n%s", err, srv.stderr)
	}
}
