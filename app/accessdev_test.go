package app_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/audittest"
)

// TestDevServerMarksAccessRecordsDev: every record a server started with
// --dev writes says dev (docs/audit-format.md, section 1: "true if served
// with ephemeral development keys"), the access records of the auditor
// commands it serves through its admin socket too. Before, they were
// written with dev false, so that an export of a development log held
// records that claimed not to be development ones.
func TestDevServerMarksAccessRecordsDev(t *testing.T) {
	f := newFixture(t)
	path := filepath.Join(f.data, app.AuditFile)
	audittest.VerifyOnCleanup(t, path)
	a, ac := serveWithAdmin(t, f, app.Options{
		Checkpoints: app.CheckpointOptions{Every: 1, Interval: 20 * time.Millisecond},
	})
	if _, err := ac.Do(context.Background(), access.OpVerify, access.VerifyRequest{}, access.Discard); err != nil {
		t.Fatal(err)
	}
	a.Close()

	var out bytes.Buffer
	if _, err := audit.ExportFile(context.Background(), path, &out, audit.FormatJSONL, audit.Filter{}); err != nil {
		t.Fatal(err)
	}
	verified := 0
	for _, line := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		r, err := audit.Decode(line)
		if err != nil {
			t.Fatal(err)
		}
		if r.Action == access.ActionVerify {
			verified++
		}
		if !r.Dev {
			t.Errorf("record seq %d (%s, source %s) of a --dev server has dev false", r.Seq, r.Action, r.Source)
		}
	}
	if verified != 1 {
		t.Fatalf("%d audit/verify records, want 1", verified)
	}
}
