package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/audittest"
)

// TestVerifyUnrecordedAnchorsAreNoVerdict: a log that cannot be opened for
// writing is verified read-only, without its anchors. With --pubkey, the
// anchors not being checked is missing evidence, not a problem found: an
// intact log verified so exits 2 (no verdict on the anchors), with its
// records' verdict printed. It exited 1 with "BROKEN anchor: not
// checked", like a log that does not match its checkpoints.
func TestVerifyUnrecordedAnchorsAreNoVerdict(t *testing.T) {
	dir := t.TempDir()
	log := audittest.OpenPath(t, filepath.Join(dir, "audit.db"), audit.Options{})
	for range 3 {
		if _, err := log.Append(context.Background(), audit.Entry{Action: "resources/list", Outcome: audit.OutcomeAllow,
			Principal: audit.Principal{Sub: "dr-a", Roles: []string{"clinician"}}, PurposeOfUse: "TREAT"}); err != nil {
			t.Fatal(err)
		}
	}
	log.Close()
	var out bytes.Buffer
	cmd := &cobra.Command{}
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetContext(context.Background())
	cause := errors.New("audit: audit log is corrupt: head_damaged")
	for _, asJSON := range []bool{false, true} {
		out.Reset()
		res, err := verifyUnrecorded(cmd, dataDir(dir), access.VerifyRequest{VerifierKeys: []byte("keys")}, cause)
		if err != nil {
			t.Fatal(err)
		}
		err = printVerify(cmd, res, asJSON, "keys")
		if code := exitCode(verdictExit(err)); code != 2 {
			t.Errorf("json=%v: exit %d (%v), want 2: the anchors were not checked\n%s", asJSON, code, err, out.String())
		}
		if strings.Contains(out.String(), "BROKEN") || res.OK {
			t.Errorf("json=%v: a log whose anchors were not checked is reported broken or verified (ok=%v):\n%s", asJSON, res.OK, out.String())
		}
		if !strings.Contains(out.String(), "head_damaged") {
			t.Errorf("json=%v: the output does not say why the anchors were not checked:\n%s", asJSON, out.String())
		}
	}
}
