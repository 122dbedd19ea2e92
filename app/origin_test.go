package app_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/audit/checkpoint"
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
