package bundle_test

import (
	"slices"
	"testing"

	"github.com/custos-mcp/custos/audit/bundle"
	"github.com/custos-mcp/custos/server"
)

// TestServerNamesAgree: the exports recognize refusals and aggregate
// refusal records by the server's action and reason names, which they
// copy (audit/bundle does not import server); the copies must not drift.
func TestServerNamesAgree(t *testing.T) {
	want := []string{server.ActionAuthReject, server.ActionRateLimited, server.ReasonDiskLow}
	if !slices.Equal(bundle.ServerNames, want) {
		t.Errorf("audit/bundle's names %v, the server's %v", bundle.ServerNames, want)
	}
}
