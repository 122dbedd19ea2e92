package main

import (
	"strings"
	"testing"

	"github.com/custos-mcp/custos/compliance/report"
)

// TestVerificationTextNamesFailedCheckpoints: verification.txt counts as
// signed only the checkpoints whose signature verified, and names the
// others as failed, per anchor file and in all.
func TestVerificationTextNamesFailedCheckpoints(t *testing.T) {
	rep := &report.Report{}
	rep.Verification.Anchors = report.AnchorCheck{
		Checkpoints: 1, Failed: 1, LatestSize: 10, LatestRoot: "R10", Sources: "a, b",
		Error: "anchor b line 2: checkpoint: signature does not verify",
		Files: []report.AnchorFile{
			{Path: "a/checkpoints.jsonl", Checkpoints: 1, LatestSize: 10, LatestRoot: "R10", Failed: []string{}},
			{Path: "b/checkpoints.jsonl", Checkpoints: 1, LatestSize: 10, LatestRoot: "R10", Failed: []string{"line 2 (size 15)"}},
		},
	}
	got := verificationText(rep)
	for _, want := range []string{
		"anchors:    FAIL  1 signed checkpoints, 1 failed the signature check (a, b), latest size 10 root R10\n",
		"  a/checkpoints.jsonl: 1 signed checkpoint, latest size 10 root R10\n",
		"  b/checkpoints.jsonl: 1 signed checkpoint, 1 failed the signature check (line 2 (size 15)), latest size 10 root R10\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("verification.txt lacks %q:\n%s", want, got)
		}
	}
}
