package bundle_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/custos-mcp/custos/audit/bundle"
	"github.com/custos-mcp/custos/audit/scrub"
	"github.com/custos-mcp/custos/fhirsync"
	"github.com/custos-mcp/custos/policy/btg"
	"github.com/custos-mcp/custos/server"
)

// TestServerNamesAgree: the exports recognize refusals and aggregate
// refusal records by the server's action and reason names, which they
// copy (audit/bundle does not import server); the copies must not drift.
func TestServerNamesAgree(t *testing.T) {
	want := []string{server.ActionAuthReject, server.ActionRateLimited, server.ReasonDiskLow, server.ReasonAggregate}
	if !slices.Equal(bundle.ServerNames, want) {
		t.Errorf("audit/bundle's names %v, the server's %v", bundle.ServerNames, want)
	}
}

// TestOwnActNamesAgree: the exports tell custos's own acts by their
// writers' action names (copied: audit/bundle imports none of them).
func TestOwnActNamesAgree(t *testing.T) {
	want := []string{server.ActionRetire, server.ActionPolicyLoad, server.ActionPolicyReject, btg.KindExpire, scrub.Action,
		fhirsync.ActionSyncStart, fhirsync.ActionSyncEnd}
	got := slices.Sorted(maps.Keys(bundle.OwnActs))
	if slices.Sort(want); !slices.Equal(got, want) {
		t.Errorf("audit/bundle's own acts %v, their writers' names %v", got, want)
	}
}
