package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
)

// TestEditedRecordAfterRestart drives the real binary through both cases
// of issue 16 item 5: a record edited in the middle of a stopped server's
// log, behind the last anchored checkpoint, is found by the scrubber's
// first pass after the restart (readyz not ready naming the seq, the
// integrity metric 0, reads refused, an audit/integrity record naming the
// seq); a record edited after the last anchored checkpoint (written by a
// server that crashed before anchoring it) makes serve refuse to start,
// naming the seq.
func TestEditedRecordAfterRestart(t *testing.T) {
	r := audittest.NewRecorder(t)
	d := newDataset(r)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, d.principal("clinician"), tokens)
	anchor := t.TempDir()
	devServe(t, d, tokens, tok, anchor, 3)
	// Record 2, the list: the last anchored checkpoint covers every
	// record (a clean stop), and startup checks only the last record and
	// the one before it.
	const victim = 2
	audittest.FlipRecord(t, d.audit(), victim)

	opsFile := filepath.Join(t.TempDir(), "ops")
	start := time.Now()
	s := serve(t, d, nil, "--dev", "--listen", loopback, "--tokens", tokens, "--anchor-dir", anchor,
		"--checkpoint-interval", "50ms", "--node", "e2e", "--ops-listen", loopback, "--ops-addr-file", opsFile,
		"--scrub-interval", "2s")
	opsURL := s.waitAddr(t, opsFile)
	get := func(path string) (int, string) { t.Helper(); return httpGet(t, opsURL+path) }
	var code int
	var body string
	for deadline := start.Add(2*time.Second + 10*time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if code, body = get("/readyz"); code == http.StatusServiceUnavailable {
			break
		}
	}
	if want := fmt.Sprintf("hash_mismatch at seq %d", victim); code != http.StatusServiceUnavailable || !strings.Contains(body, want) {
		t.Fatalf("/readyz = %d %s; want 503 naming %s\n%s", code, body, want, s.stderr)
	}
	t.Logf("found %v after the restart: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(body))
	if _, m := get("/metrics"); !strings.Contains(m, "\ncustos_audit_integrity_ok 0\n") || strings.Contains(m, "\ncustos_audit_scrub_failures_total 0\n") {
		t.Errorf("metrics do not show the break:\n%s", m)
	}
	cs := connect(t, s.url, tok)
	if _, err := cs.ListResources(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "integrity check failed") {
		t.Errorf("list after the break: %v", err)
	}
	cs.Close()
	if err := s.stop(t); err != nil {
		t.Fatalf("serve: %v\n%s", err, s.stderr)
	}
	logs := s.stderr.String()
	if !strings.Contains(logs, "AUDIT LOG INTEGRITY FAILURE") || !strings.Contains(logs, fmt.Sprintf(`"seq":%d`, victim)) {
		t.Errorf("the operational log does not name the break:\n%s", logs)
	}

	// The audit/integrity record, after the break, names the seq.
	l, err := audit.Open(d.audit(), audit.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	head, _ := l.Head()
	var reasons []string
	err = l.Records(context.Background(), 1, head, func(seq uint64, canon []byte) error {
		if rec, err := audit.Decode(canon); err == nil && rec.Action == "audit/integrity" {
			reasons = append(reasons, rec.Reason)
		}
		return nil
	})
	l.Close()
	if err != nil || len(reasons) == 0 || !strings.HasPrefix(reasons[0], fmt.Sprintf("kind=hash_mismatch,seq=%d,", victim)) {
		t.Fatalf("audit/integrity records: %q, %v", reasons, err)
	}

	// A record written after the last anchored checkpoint, then edited:
	// serve refuses to start and names it.
	l, err = audit.Open(d.audit(), audit.Options{Node: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	var last audit.Record
	for range 3 {
		if last, err = l.Append(context.Background(), audit.Entry{Action: audit.ActionResourcesList, Outcome: audit.OutcomeAllow,
			Reason: "crashed_before_anchor", Principal: audit.Principal{Sub: "e2e"}, Dev: true}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	audittest.FlipRecord(t, d.audit(), last.Seq-1)
	_, errOut, exit := custos(t, nil, "serve", "--dev", "--data-dir", d.data, "--stdio",
		"--principal-file", d.principal("clinician"), "--anchor-dir", anchor, "--node", "e2e")
	if exit != 1 || !strings.Contains(errOut, "refusing to serve") || !strings.Contains(errOut, fmt.Sprintf("seq %d: hash_mismatch", last.Seq-1)) {
		t.Fatalf("serve on a log edited after its last anchor: exit %d\n%s", exit, errOut)
	}
	t.Logf("refusal: %s", errOut)

	r.RunCleanups()
	if !r.Failed() {
		t.Fatal("the data set's cleanup check passed an edited audit log")
	}
}
