package access_test

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit/access"
)

// TestBundleProgressIsReportedOutsideReads: a bundle's progress reports
// are made between its reads of the log, never inside one. Over the admin
// socket a report is a frame written to the caller, which blocks for up to
// the stall limit (a minute) when the caller stops reading (suspended with
// Ctrl-Z): inside a read transaction that would keep bbolt from remapping
// the log, and every append, so every request the server answers, would
// wait for it (docs/audit-access.md). The probe: while the first report is
// being made, the log must be able to close, which, like bbolt's remap,
// waits for every reader of the log. A bundle reported its progress from
// inside audit.Log.Records' read transactions.
func TestBundleProgressIsReportedOutsideReads(t *testing.T) {
	l, dir := openLog(t)
	appendN(t, l, 20)
	signer, _ := testVerifierKeys(t, "custos.test/n1/audit")
	anchorHead(t, l, dir, signer)
	local := access.Local{Service: access.New(l, nil, dir, nil), Caller: alice}
	out := filepath.Join(t.TempDir(), "b")
	reports := 0
	progress := func(p access.Progress) {
		reports++
		if reports > 1 {
			return
		}
		closed := make(chan error, 1)
		go func() { closed <- l.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Errorf("closing the log during a progress report: %v", err)
			}
		case <-time.After(3 * time.Second):
			t.Errorf("the progress report %+v was made inside a read of the audit log: the log could not close for 3 s while it was being delivered", p)
		}
	}
	// The log is closed by the probe, so the bundle itself may fail
	// afterwards: only where its first report is made is checked.
	local.DoProgress(context.Background(), access.OpBundle, access.BundleRequest{Ask: access.Ask{Purpose: "HOPERAT"}},
		func(r io.Reader) error { return access.ReadBundle(r, out) }, progress)
	if reports == 0 {
		t.Fatal("the bundle reported no progress")
	}
}
