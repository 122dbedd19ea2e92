//go:build unix

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/internal/asnobody"
)

// TestOutputDirNotWritableChangesNothing: 'custos backup --out DIR' whose
// parent the account cannot write in (an operator's account and a root-owned
// /backup) appended its access record ("backup", outcome allow), had the
// log read, and only then failed ("backup NOT written: … mkdir
// /backup/.x.partial-…: permission denied"): bad input that changed the
// audit log. Such a path is now refused as bad usage (exit 2) naming the
// directory, before the log is opened, for every output flag (audit export
// -o, compliance --out). Found by probe-ops as the service account.
func TestOutputDirNotWritableChangesNothing(t *testing.T) {
	if asnobody.Run(t, "TestOutputDirNotWritableChangesNothing") {
		return
	}
	data := t.TempDir()
	log := filepath.Join(data, "audit.db")
	audittest.OpenPath(t, log, audit.Options{}).Close()
	ro := t.TempDir()
	if err := os.Chmod(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"backup", "--data-dir", data, "--out", filepath.Join(ro, "b"), "--purpose", "HOPERAT"},
		{"audit", "export", "--data-dir", data, "--purpose", "HOPERAT", "--format", "jsonl", "-o", filepath.Join(ro, "x.jsonl")},
	} {
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), "not writable by this account") {
			t.Errorf("custos %s: exit %d, want 2 naming the directory not writable:\n%s", strings.Join(args[:2], " "), code, errb.String())
		}
	}
	if sum := audittest.Verify(t, log); sum.Records != 0 {
		t.Errorf("the refused commands appended %d records to the audit log", sum.Records)
	}
}
