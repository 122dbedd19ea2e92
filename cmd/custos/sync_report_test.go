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
