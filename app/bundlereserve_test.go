package app_test

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/audit/bundle"
)

// TestBundleKeepsTheAuditVolumeReserve: serve hands its audit volume's
// reserve check to the admin socket's bundles, which are assembled in the
// data directory: with the whole volume in the reserve, an export bundle
// is refused (no_room, naming the reserve) and nothing of it is written.
// Before, the bundle was assembled in the reserve and sent.
func TestBundleKeepsTheAuditVolumeReserve(t *testing.T) {
	f := newFixture(t)
	audittest.VerifyOnCleanup(t, filepath.Join(f.data, app.AuditFile))
	_, ac := serveWithAdmin(t, f, app.Options{
		AuditDisk:   app.AuditDiskOptions{LowWatermark: 1 << 62, Reserve: 1 << 62},
		Checkpoints: app.CheckpointOptions{Every: 1, Interval: 20 * time.Millisecond},
	})
	ctx := context.Background()
	var err error
	req := access.BundleRequest{Ask: access.Ask{Purpose: "HOPERAT"}, Formats: []bundle.Format{bundle.FormatCSV}}
	// The first bundles may find no checkpoint yet.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, err = ac.Do(ctx, access.OpBundle, req, func(r io.Reader) error { _, err := io.Copy(io.Discard, r); return err })
		if !errors.Is(err, bundle.ErrNoCheckpoint) || time.Now().After(deadline) {
			break
		}
	}
	if !errors.Is(err, access.ErrNoRoom) {
		t.Fatalf("a bundle with the audit volume in its reserve: %v, want no_room", err)
	}
	if !strings.Contains(err.Error(), "in reserve (audit.disk_reserve)") {
		t.Errorf("the refusal does not name the reserve: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(f.data, ".access-bundle-*")); len(left) > 0 {
		t.Errorf("a partial bundle is left: %v", left)
	}
}
