package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/checkpoint"
	"github.com/custos-mcp/custos/compliance/report"
	"github.com/custos-mcp/custos/secrets"
)

// TestComplianceReportNamesTheAnchorCause: 'compliance report' reported a
// failed anchor check by its error text alone, where 'audit verify' tells
// a verifier file for another signing key (unknown_key: the log may be
// intact) from a log that does not match its checkpoints (mismatch: a
// fork). The package's report.json, its verification.txt, the summary
// and --json's summary now carry the cause as audit verify names it, and
// the text says it in audit verify's words: a rotated key's old verifier
// file, then a fork signed by the current key.
func TestComplianceReportNamesTheAnchorCause(t *testing.T) {
	data, old := rotatedDataDir(t)
	check := func(name, cause, says string, keys ...string) {
		t.Helper()
		for _, asJSON := range []bool{false, true} {
			out := filepath.Join(t.TempDir(), "pkg")
			args := append([]string{"compliance", "report", "--data-dir", data, "--purpose", "HOPERAT", "--out", out}, keys...)
			if asJSON {
				args = append(args, "--json")
			}
			code, stdout, stderr := runCLI(args...)
			if code != 1 {
				t.Fatalf("%s: exit %d, want 1 (verification failed)\n%s%s", name, code, stdout, stderr)

			}
			if asJSON {
				var sum struct {
					Anchors struct {
						OK    bool   `json:"ok"`
						Cause string `json:"cause"`
					} `json:"anchors"`
				}
				if err := json.Unmarshal([]byte(stdout), &sum); err != nil || sum.Anchors.OK || sum.Anchors.Cause != cause {
					t.Errorf("%s: --json's anchors %+v (%v), want not ok, cause %q\n%s", name, sum.Anchors, err, cause, stdout)
				}
			} else if !strings.Contains(stdout, "anchors FAILED ("+cause+"): "+says) {
				t.Errorf("%s: the summary does not say anchors FAILED (%s): %s…\n%s", name, cause, says, stdout)
			}
			b, err := os.ReadFile(filepath.Join(out, packageReportJSON))
			if err != nil {
				t.Fatal(err)
			}
			var rep report.Report
			if err := json.Unmarshal(b, &rep); err != nil || rep.Verification.Anchors.Cause != cause {
				t.Errorf("%s: report.json's anchors.cause %q (%v), want %q", name, rep.Verification.Anchors.Cause, err, cause)
			}
			if page, err := os.ReadFile(filepath.Join(out, packageReportHTML)); err != nil || !strings.Contains(string(page), `(cause <span class="mono">`+cause+`</span>`) {
				t.Errorf("%s: report.html does not name the cause %s (%v)", name, cause, err)
			}
			txt, err := os.ReadFile(filepath.Join(out, packageVerification))
			if err != nil || !strings.Contains(string(txt), "cause: "+cause+": "+says) {
				t.Errorf("%s: verification.txt does not say the cause %s: %s… (%v)\n%s", name, cause, says, err, txt)
			}
		}
	}
	check("an old verifier file", access.AnchorUnknownKey, "the verifier key set (--pubkey, or derived with --dev or from Vault) holds no key that signed the anchored checkpoint", "--pubkey", old)

	// A fork: an anchor holding a checkpoint the current key signed for
	// another root of an earlier size (at the latest one the bundle
	// itself is refused, and no package is written).
	anchor := t.TempDir()
	kf, err := os.ReadFile(filepath.Join(data, secrets.DevKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(anchor, secrets.DevKeyFile), kf, 0o600); err != nil {
		t.Fatal(err)
	}
	anchorCheckpoint(t, anchor, checkpoint.Checkpoint{Origin: testOrigin, Size: 2, Root: tlog.Hash{1}})
	check("a fork", access.AnchorMismatch, "audit log does not match its anchored checkpoints", "--dev", "--anchor-dir", anchor)
}
