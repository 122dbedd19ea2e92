package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/fhirsync"
	"github.com/spf13/cobra"
)

// The text report of a sync names the Binaries it fetched by their
// attachment urls, and says nothing of them when it fetched none.
func TestReportSyncNamesFetchedBinaries(t *testing.T) {
	for _, tc := range []struct {
		binaries int
		want     string
	}{
		{0, "rest, full, 8 requests\n"},
		{2, "rest, full, 8 requests, 2 Binaries fetched by url\n"},
	} {
		var out bytes.Buffer
		cmd := &cobra.Command{}
		cmd.SetOut(&out)
		res := fhirsync.Result{Base: "https://ehr.example/fhir", Mode: "rest", Full: true, Resources: 6, Binaries: tc.binaries, Requests: 8}
		if err := reportSync(cmd, res, false); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(out.String(), tc.want) {
			t.Errorf("report %q, want it to end %q", out.String(), tc.want)
		}
	}
}

// The text report counts as deleted only what the sync retired, and names
// apart the deletions of resources the catalog did not hold.
func TestReportSyncNamesIgnoredDeletions(t *testing.T) {
	for _, tc := range []struct {
		deleted, ignored int
		want             string
	}{
		{2, 0, "synced 6 resources (2 deleted) from "},
		{1, 3, "synced 6 resources (1 deleted; 3 deletions of resources not in the catalog ignored) from "},
	} {
		var out bytes.Buffer
		cmd := &cobra.Command{}
		cmd.SetOut(&out)
		res := fhirsync.Result{Base: "https://ehr.example/fhir", Mode: "bulk", Resources: 6, Deleted: tc.deleted, DeletesIgnored: tc.ignored, Requests: 8}
		if err := reportSync(cmd, res, false); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(out.String(), tc.want) {
			t.Errorf("report %q, want it to begin %q", out.String(), tc.want)
		}
	}
}
