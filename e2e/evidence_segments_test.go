package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit"
)

// TestEvidenceReportAcrossArchivedSegments: a server rolls its log into
// 64 KiB segments and moves the sealed ones to an archive directory. The
// compliance package of the whole log verifies, says nothing was deleted,
// and its figures recount from a bundle whose records come from archived
// segments and the live one; a period from a few records before the end
// of the first sealed segment to a few after it holds exactly the records
// in [since, until), across the seal.
func TestEvidenceReportAcrossArchivedSegments(t *testing.T) {
	d := newDataset(t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	tok := newToken(t, d.principal("clinician"), tokens)
	archive := t.TempDir()
	s := serve(t, d, nil, "--dev", "--listen", loopback, "--tokens", tokens, "--checkpoint-interval", "50ms",
		"--rate-limit", "0", "--audit-roll-size", "65536", "--audit-archive-dir", archive)
	reads, stopLoad := readUnderLoad(t, s.url, tok, 2)
	waitFor(t, func() bool {
		seals, _ := filepath.Glob(filepath.Join(archive, "*.seal"))
		return len(seals) >= 2 && reads.Load() > 0
	})
	stopLoad()
	if err := s.stop(t); err != nil {
		t.Fatalf("serve: %v\n%s", err, s.stderr)
	}
	seals, _ := filepath.Glob(filepath.Join(archive, "*.seal"))
	slices.Sort(seals)
	text, err := os.ReadFile(seals[0])
	if err != nil {
		t.Fatal(err)
	}
	first, err := audit.ParseSeal(text, nil)
	if err != nil {
		t.Fatalf("%s: %v", seals[0], err)
	}
	if local, _ := filepath.Glob(filepath.Join(audit.SealedDir(d.audit()), "*.db")); len(local) != 0 {
		t.Fatalf("sealed segments left in the data directory: %q", local)
	}

	pkg := filepath.Join(t.TempDir(), "package")
	if o, e, code := custos(t, nil, "compliance", "report", "--data-dir", d.data, "--dev", "--purpose", "HOPERAT", "--out", pkg); code != 0 {
		t.Fatalf("compliance report: exit %d\n%s%s", code, o, e)
	}
	rep, recs := readPackage(t, pkg)
	if !rep.Verification.OK || !rep.Retention.NothingDeleted.OK || rep.Bundle.Manifest.From != 1 || rep.Bundle.Manifest.To <= first.Last+5 {
		t.Fatalf("package over segments: verified %v, nothing deleted %v, bundle %d..%d, first segment ends at %d",
			rep.Verification.OK, rep.Retention.NothingDeleted.OK, rep.Bundle.Manifest.From, rep.Bundle.Manifest.To, first.Last)
	}
	recount(t, rep, recs)

	since, until := recs[first.Last-3-1].Time, recs[first.Last+4-1].Time
	pkg2 := filepath.Join(t.TempDir(), "period")
	if o, e, code := custos(t, nil, "compliance", "report", "--data-dir", d.data, "--dev", "--purpose", "HOPERAT", "--out", pkg2,
		"--since", since.In(time.FixedZone("EST", -5*3600)).Format(time.RFC3339Nano), "--until", until.Format(time.RFC3339Nano)); code != 0 {
		t.Fatalf("compliance report of a period across the seal: exit %d\n%s%s", code, o, e)
	}
	rep2, recs2 := readPackage(t, pkg2)
	var want, got []uint64
	for _, r := range recs {
		if !r.Time.Before(since) && r.Time.Before(until) {
			want = append(want, r.Seq)
		}
	}
	for _, r := range recs2 {
		got = append(got, r.Seq)
	}
	if !slices.Equal(got, want) || !slices.Contains(got, first.Last) || !slices.Contains(got, first.Last+1) ||
		rep2.Period.First.Seq != want[0] || rep2.Period.Last.Seq != want[len(want)-1] {
		t.Errorf("period [%s, %s) across the seal after %d: records %v, report %d..%d; want %v",
			since, until, first.Last, got, rep2.Period.First.Seq, rep2.Period.Last.Seq, want)
	}
	if !rep2.Verification.OK {
		t.Errorf("the period's package does not verify: %+v", rep2.Verification)
	}
	recount(t, rep2, recs2)
	html, _ := os.ReadFile(filepath.Join(pkg2, "report.html"))
	if !strings.Contains(string(html), "Verification passed") {
		t.Error("the period's page does not say the verification passed")
	}
}
