package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit/audittest"
)

// devServe runs `custos serve --dev` with checkpoints anchored in anchor,
// makes n reads as the clinician, and stops the server cleanly (which
// signs a final checkpoint).
func devServe(t *testing.T, d *dataset, tokens, tok, anchor string, n int) {
	t.Helper()
	devServeRead(t, d, tokens, tok, anchor, n, nil)
}

// devServeRead is devServe reading the given URIs instead (failures, e.g.
// denials, are counted and returned) when uris is not nil.
func devServeRead(t *testing.T, d *dataset, tokens, tok, anchor string, n int, uris []string) (failed int) {
	t.Helper()
	s := serve(t, d, nil, "--dev", "--listen", loopback,
		"--tokens", tokens, "--anchor-dir", anchor, "--checkpoint-interval", "50ms", "--node", "e2e")
	cs := connect(t, s.url, tok)
	if uris == nil {
		page, err := cs.ListResources(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: page.Resources[i%len(page.Resources)].URI}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, u := range uris {
		if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: u}); err != nil {
			failed++
		}
	}
	cs.Close()
	if err := s.stop(t); err != nil {
		t.Fatalf("serve: %v\n%s", err, s.stderr)
	}
	return failed
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRolledBackAuditLogIsRefused: an audit.db restored from an earlier
// copy (together with the data directory's own checkpoint file) is caught
// at startup by the checkpoints in the external anchor.
func TestRolledBackAuditLogIsRefused(t *testing.T) {
	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, d.principal("clinician"), tokens)
	anchor := t.TempDir()
	backup := t.TempDir()

	devServe(t, d, tokens, tok, anchor, 3)
	copyFile(t, d.audit(), filepath.Join(backup, "audit.db"))
	copyFile(t, filepath.Join(d.data, "checkpoints.jsonl"), filepath.Join(backup, "checkpoints.jsonl"))
	devServe(t, d, tokens, tok, anchor, 5)
	audittest.Verify(t, d.audit())
	vkeys := filepath.Join(t.TempDir(), "vkeys")
	mustCustos(t, "audit", "pubkey", "--data-dir", d.data, "--dev", "-o", vkeys)
	if out := mustCustos(t, "audit", "verify", "--data-dir", d.data, "--anchor-dir", anchor, "--pubkey", vkeys); !strings.Contains(out, "consistent with") {
		t.Fatalf("verify against the anchor: %s", out)
	}

	// Roll back both files in the data directory.
	copyFile(t, filepath.Join(backup, "audit.db"), d.audit())
	copyFile(t, filepath.Join(backup, "checkpoints.jsonl"), filepath.Join(d.data, "checkpoints.jsonl"))
	// The rolled-back log is internally intact: only the anchor can tell.
	audittest.Verify(t, d.audit())
	out, _, code := custos(t, nil, "audit", "verify", "--data-dir", d.data, "--anchor-dir", anchor, "--pubkey", vkeys)
	if code != 1 || !strings.Contains(out, "BROKEN anchor") || !strings.Contains(out, "rolled back") {
		t.Fatalf("audit verify of a rolled-back log against the anchor: exit %d\n%s", code, out)
	}
	_, errOut, code := custos(t, nil, "serve", "--dev", "--data-dir", d.data, "--stdio",
		"--principal-file", d.principal("clinician"), "--anchor-dir", anchor, "--node", "e2e")
	if code != 1 || !strings.Contains(errOut, "refusing to serve") || !strings.Contains(errOut, "rolled back") {
		t.Fatalf("serve on a rolled-back audit.db: exit %d\n%s", code, errOut)
	}
	t.Logf("refusal: %s", errOut)
}
