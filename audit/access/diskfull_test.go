package access_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/audit/bundle"
	"github.com/custos-mcp/custos/internal/tmpfstest"
	"github.com/custos-mcp/custos/server/ops"
)

// A bundle is assembled in the data directory, on the audit volume, before
// it reaches the caller: these tests put the data directory on a small
// tmpfs (internal/tmpfstest: root only; without it they fail under CI=true
// and are skipped otherwise) and fill it.

// bundleOnTmpfs is a log of enough records for a bundle of about 4 MB
// with every human format, in a data directory on a 32 MiB tmpfs, with
// a checkpoint covering them; it returns the log, the directory and the
// verifier keys.
func bundleOnTmpfs(t *testing.T) (*audit.Log, string, []byte) {
	t.Helper()
	dir := filepath.Join(tmpfstest.Mount(t, 32<<20), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	l := audittest.OpenPath(t, filepath.Join(dir, "audit.db"), audit.Options{Node: "n1"})
	appendN(t, l, 1500)
	signer, keys := testVerifierKeys(t, "custos.test/n1/audit")
	anchorHead(t, l, dir, signer)
	return l, dir, keys
}

var allFormats = []bundle.Format{bundle.FormatCSV, bundle.FormatFHIR, bundle.FormatOCSF}

// noBundleLeft fails if a bundle directory is left in dir.
func noBundleLeft(t *testing.T, dir string) {
	t.Helper()
	left, _ := filepath.Glob(filepath.Join(dir, ".access-bundle-*"))
	if len(left) > 0 {
		t.Errorf("a partial bundle is left in the data directory: %v", left)
	}
}

// TestBundleKeepsTheAuditVolumeReserve: with the server's reserve check
// (ops.DiskWatch.Spare), a bundle that does not fit above the reserve is
// refused with ErrNoRoom naming the free space and the reserve, before
// its writes take the volume into the reserve; nothing of it is left,
// the reserve is still there for a refusal record, and the log verifies
// (audittest's cleanup). With the reserve free again, the same export
// works. Before the fix the bundle was written into the reserve (it fit
// in the free space) and the export succeeded.
func TestBundleKeepsTheAuditVolumeReserve(t *testing.T) {
	l, dir, keys := bundleOnTmpfs(t)
	const reserve = 4 << 20
	disk, err := ops.NewDiskWatch(ops.DiskOptions{Dir: dir, Watermark: reserve, Reserve: reserve})
	if err != nil {
		t.Fatal(err)
	}
	svc := access.New(l, nil, dir, nil)
	lowest := int64(1 << 62)
	svc.LimitSpace(func(need uint64) error {
		lowest = min(lowest, tmpfstest.Free(t, dir))
		return disk.Spare(need)
	})
	local := access.Local{Service: svc, Caller: alice}
	ask := access.Ask{Purpose: "HOPERAT"}
	ctx := context.Background()

	// Room for the bundle, but only by taking the reserve.
	filler := tmpfstest.Fill(t, dir, reserve+1<<20)
	for _, tc := range []struct {
		op  access.Op
		req any
	}{
		{access.OpBundle, access.BundleRequest{Ask: ask, Formats: allFormats}},
		{access.OpCompliance, access.ComplianceRequest{Ask: ask, Retention: time.Hour, VerifierKeys: keys}},
	} {
		t.Run(string(tc.op), func(t *testing.T) {
			lowest = 1 << 62
			_, err := local.Do(ctx, tc.op, tc.req, access.Discard)
			if !errors.Is(err, access.ErrNoRoom) || access.Code(err) != "no_room" {
				t.Fatalf("a bundle that fits only in the reserve: %v (code %s), want ErrNoRoom", err, access.Code(err))
			}
			for _, want := range []string{"no room on the audit volume to assemble the bundle", fmt.Sprintf("keeps %d in reserve (audit.disk_reserve)", reserve), "free space on the audit volume or export a shorter range"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if lowest < reserve {
				t.Errorf("the bundle took the audit volume down to %d bytes free, into its reserve of %d", lowest, reserve)
			}
			noBundleLeft(t, dir)
			if free := tmpfstest.Free(t, dir); free < reserve+1<<20-64<<10 {
				t.Errorf("after the refused bundle %d bytes are free, want about the %d before it", free, reserve+1<<20)
			}
			// The reserve is there for what must be written.
			if _, err := l.Append(ctx, audit.Entry{Action: audit.ActionResourcesRead, Outcome: audit.OutcomeError, Reason: "disk_low"}); err != nil {
				t.Fatalf("a refusal record after the refused bundle: %v", err)
			}
		})
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "bundle")
	res, err := local.Do(ctx, access.OpBundle, access.BundleRequest{Ask: ask, Formats: allFormats}, func(r io.Reader) error { return access.ReadBundle(r, out) })
	if err != nil {
		t.Fatalf("the bundle with room: %v", err)
	}
	if _, err := bundle.Verify(out, keys); err != nil {
		t.Fatalf("the bundle with room does not verify: %v", err)
	}
	if size := dirSize(t, out); size < 2<<20 {
		t.Errorf("the bundle is %d bytes: too small to test the reserve (%d records)", size, res.Records)
	}
	noBundleLeft(t, dir)
}

// TestBundleOnAFullAuditVolume: without a reserve check (the CLI's own
// process), a bundle that does not fit on the audit volume fails with
// ErrNoRoom saying that it is assembled there, whatever room the caller's
// --out has; what it wrote is removed and its space given back at once
// (before the fix its files were removed while still open, so their
// blocks stayed taken until the garbage collector closed them).
func TestBundleOnAFullAuditVolume(t *testing.T) {
	l, dir, _ := bundleOnTmpfs(t)
	local := access.Local{Service: access.New(l, nil, dir, nil), Caller: alice}
	tmpfstest.Fill(t, dir, 1<<20)
	before := tmpfstest.Free(t, dir)
	_, err := local.Do(context.Background(), access.OpBundle, access.BundleRequest{Ask: access.Ask{Purpose: "HOPERAT"}, Formats: allFormats}, access.Discard)
	if !errors.Is(err, access.ErrNoRoom) {
		t.Fatalf("a bundle larger than the free space: %v, want ErrNoRoom", err)
	}
	for _, want := range []string{fmt.Sprintf("the audit volume (%s) is full", dir), "no space left on device", "assembled there before it is written to --out"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	noBundleLeft(t, dir)
	if free := tmpfstest.Free(t, dir); free < before-64<<10 {
		t.Errorf("after the failed bundle %d bytes are free, %d before it: its removed files still hold their space", free, before)
	}
	if _, err := l.Append(context.Background(), audit.Entry{Action: audit.ActionResourcesRead, Outcome: audit.OutcomeAllow}); err != nil {
		t.Fatalf("an append after the failed bundle: %v", err)
	}
}

func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range es {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}
