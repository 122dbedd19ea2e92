package access_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/bundle"
	"github.com/custos-mcp/custos/audit/checkpoint"
)

// testVerifierKeys is a fresh note key named origin: its signer and the
// verifier key file that checks it.
func testVerifierKeys(t *testing.T, origin string) (note.Signer, []byte) {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return signer, checkpoint.FormatVerifierFile([]string{vkey})
}

// anchorHead signs a checkpoint of l's current tree and anchors it in dir,
// as serve's checkpointer does.
func anchorHead(t *testing.T, l *audit.Log, dir string, signer note.Signer) int64 {
	t.Helper()
	size, root, err := l.TreeHead(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := checkpoint.Checkpoint{Origin: signer.Name(), Size: size, Root: root}
	signed, err := checkpoint.Sign(c, signer)
	if err != nil {
		t.Fatal(err)
	}
	if err := (&checkpoint.Anchor{Dir: dir}).Append(context.Background(), signed, c, time.Now()); err != nil {
		t.Fatal(err)
	}
	return size
}

// TestComplianceRecordsFirstAndReadsTheView: OpCompliance appends one
// access record (compliance/report, with its period and retention) before
// it reads, then verifies the log and its anchors, scans exactly 1..N for
// retention while the writer keeps appending, and streams a bundle that
// ends at the latest checkpoint of size at most N and verifies offline;
// the records after it, the access record among them, are named as not
// covered.
func TestComplianceRecordsFirstAndReadsTheView(t *testing.T) {
	l, dir := openLog(t)
	appendN(t, l, 20)
	if _, err := l.Append(context.Background(), audit.Entry{Action: "policy/load", Outcome: audit.OutcomeAllow, PolicyRevision: "rev-a bundle=sha256:aa"}); err != nil {
		t.Fatal(err)
	}
	signer, keys := testVerifierKeys(t, "custos.test/access/audit")
	covered := anchorHead(t, l, dir, signer)
	appendN(t, l, 3) // after the checkpoint: not in the bundle
	local := access.Local{Service: access.New(l, nil, dir, nil), Caller: alice}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var appended atomic.Int64
	wg.Go(func() {
		for ctx.Err() == nil {
			if _, err := l.Append(context.Background(), audit.Entry{Action: audit.ActionResourcesList, Outcome: audit.OutcomeAllow}); err != nil {
				t.Error(err)
				return
			}
			appended.Add(1)
		}
	})
	since := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	out := filepath.Join(t.TempDir(), "bundle")
	var cr access.ComplianceResult
	res, err := local.Do(context.Background(), access.OpCompliance, access.ComplianceRequest{
		Ask: access.Ask{Purpose: "HOPERAT", By: "privacy-officer"}, Since: since, Retention: 24 * time.Hour, VerifierKeys: keys,
	}, func(r io.Reader) (err error) {
		cr, err = access.ReadCompliance(r, out)
		return err
	})
	cancel()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	n := res.AccessSeq
	if n < 25 || cr.AccessSeq != n || appended.Load() == 0 {
		t.Fatalf("access seq %d (result %d), %d appended meanwhile", n, cr.AccessSeq, appended.Load())
	}

	// The access record came first: it is record N, the end of the view.
	var rec audit.Record
	if err := l.Records(context.Background(), n, n, func(_ uint64, c []byte) (err error) {
		rec, err = audit.Decode(c)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if rec.Action != access.ActionComplianceReport || rec.PurposeOfUse != "HOPERAT" || rec.Principal.Sub != alice.Account ||
		rec.Reason != "by=privacy-officer since=2020-01-01T00:00:00Z retention=24h0m0s" {
		t.Fatalf("access record %+v", rec)
	}

	// Verified, and the scan covers exactly 1..N although the log grew.
	v := cr.Verification
	if !v.Log.OK || len(v.Log.Problems) != 0 || v.Log.HeadSeq < n || !v.Anchors.OK || v.Anchors.Checkpoints != 1 || v.Anchors.LatestSize != covered ||
		len(v.Anchors.Files) != 1 || v.Anchors.Files[0].Checkpoints != 1 || v.Anchors.Files[0].LatestSize != covered {
		t.Fatalf("verification %+v", v)
	}
	ret := cr.Retention
	months := 0
	for _, m := range ret.Months {
		months += m.Records
	}
	if ret.Records != n || ret.Newest.Seq != n || !ret.NothingDeleted.OK || ret.NothingDeleted.LastSeq != n ||
		ret.NothingDeleted.TreeSize != int64(n) || uint64(months) != n || ret.PastRetention.Count != 0 {
		t.Fatalf("retention of 1..%d: %+v", n, ret)
	}
	if len(cr.PolicyLoads) != 1 || cr.PolicyLoads[0].Revision != "rev-a" || cr.PolicyLoads[0].Bundle != "sha256:aa" {
		t.Fatalf("policy loads %+v", cr.PolicyLoads)
	}
	if head, _ := l.Head(); head <= n {
		t.Fatalf("head %d: nothing was appended after the view", head)
	}

	// The bundle: records 1..covered, verified offline; the rest named.
	if cr.NotCovered == nil || cr.NotCovered.From != uint64(covered)+1 || cr.NotCovered.To != n {
		t.Fatalf("not covered %+v, want %d..%d", cr.NotCovered, covered+1, n)
	}
	tr, err := bundle.Verify(out, keys)
	if err != nil || !tr.OK {
		t.Fatalf("bundle: %v\n%s", err, tr.Text())
	}
	var m bundle.Manifest
	b, _ := os.ReadFile(filepath.Join(out, bundle.FileManifest))
	if err := json.Unmarshal(b, &m); err != nil || m.From != 1 || m.To != uint64(covered) || res.Records != int(covered) {
		t.Fatalf("manifest %+v (%v), result %+v", m, err, res)
	}
	if _, err := os.Stat(filepath.Join(out, access.ComplianceFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s landed in the bundle: %v", access.ComplianceFile, err)
	}
}

// TestComplianceNeedsACheckpoint: without a signed checkpoint there is no
// bundle to give; the access was recorded all the same, and the stream
// holds nothing.
func TestComplianceNeedsACheckpoint(t *testing.T) {
	l, dir := openLog(t)
	appendN(t, l, 3)
	_, keys := testVerifierKeys(t, "custos.test/access/audit")
	local := access.Local{Service: access.New(l, nil, dir, nil), Caller: alice}
	var out bytes.Buffer
	_, err := local.Do(context.Background(), access.OpCompliance, access.ComplianceRequest{Ask: access.Ask{Purpose: "HOPERAT"}, Retention: time.Hour, VerifierKeys: keys}, func(r io.Reader) error {
		_, err := io.Copy(&out, r)
		return err
	})
	if !errors.Is(err, bundle.ErrNoCheckpoint) || access.Code(err) != "no_checkpoint" || out.Len() != 0 {
		t.Fatalf("no checkpoint: %v, %d bytes", err, out.Len())
	}
	if rec := lastRecord(t, l); rec.Seq != 4 || rec.Action != access.ActionComplianceReport {
		t.Fatalf("last record %+v, want the access record", rec)
	}
	// Malformed verifier keys or no retention are bad requests: nothing
	// is recorded.
	for _, req := range []access.ComplianceRequest{
		{Ask: access.Ask{Purpose: "HOPERAT"}, Retention: time.Hour, VerifierKeys: []byte("not a key\n")},
		{Ask: access.Ask{Purpose: "HOPERAT"}, VerifierKeys: keys},
	} {
		if _, err := local.Do(context.Background(), access.OpCompliance, req, access.Discard); !errors.Is(err, access.ErrBadRequest) {
			t.Errorf("%+v: %v, want ErrBadRequest", req, err)
		}
	}
	if head, _ := l.Head(); head != 4 {
		t.Fatalf("refused requests appended records: head %d", head)
	}
}

// TestBundleWithoutCheckpointNamesTheRange: an export bundle asked of a
// log no signed checkpoint covers names the records asked for (1..the
// log's end), not the empty range the checkpoints leave ("1..1").
func TestBundleWithoutCheckpointNamesTheRange(t *testing.T) {
	l, dir := openLog(t)
	appendN(t, l, 5)
	local := access.Local{Service: access.New(l, nil, dir, nil), Caller: alice}
	_, err := local.Do(context.Background(), access.OpBundle, access.BundleRequest{Ask: access.Ask{Purpose: "HOPERAT"}}, func(r io.Reader) error {
		_, err := io.Copy(io.Discard, r)
		return err
	})
	// Five records and the access record: the view ends at 6.
	if !errors.Is(err, bundle.ErrNoCheckpoint) || !strings.Contains(err.Error(), "records 1..6: the latest signed checkpoint covers 0 records") {
		t.Fatalf("no checkpoint: %v", err)
	}
}

// anchoredLog is a log of 20 records whose head is anchored, with its
// access service as alice's.
func anchoredLog(t *testing.T) (*audit.Log, access.Local) {
	t.Helper()
	l, dir := openLog(t)
	appendN(t, l, 20)
	signer, _ := testVerifierKeys(t, "custos.test/n1/audit")
	anchorHead(t, l, dir, signer)
	return l, access.Local{Service: access.New(l, nil, dir, nil), Caller: alice}
}

// discard reads an operation's output and drops it.
func discard(r io.Reader) error { _, err := io.Copy(io.Discard, r); return err }

// TestRequestsBeyondTheLogAreNamedSo: a bundle or a proof of records past
// the log's last record (the request's own access record) cannot be served
// by waiting: the error says that the records do not exist and is the
// caller's mistake (bad_request), not "wait for the next checkpoint"
// (no_checkpoint), which holds only for records that exist but are newer
// than the latest checkpoint.
func TestRequestsBeyondTheLogAreNamedSo(t *testing.T) {
	l, local := anchoredLog(t)
	ask := access.Ask{Purpose: "HOPERAT"}
	for name, tc := range map[string]struct {
		op   access.Op
		req  any
		code string
	}{
		"bundle from past the end":                         {access.OpBundle, access.BundleRequest{Ask: ask, From: 500}, "bad_request"},
		"bundle to past the end":                           {access.OpBundle, access.BundleRequest{Ask: ask, From: 2, To: 500}, "bad_request"},
		"proof past the end":                               {access.OpProve, access.ProveRequest{Ask: ask, Seq: 500}, "bad_request"},
		"proof of the access record, not yet checkpointed": {access.OpProve, access.ProveRequest{Ask: ask, Seq: 0}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			if pr, ok := tc.req.(access.ProveRequest); ok && pr.Seq == 0 {
				head, _ := l.Head()
				tc.req, tc.code = access.ProveRequest{Ask: ask, Seq: head + 1}, "no_checkpoint" // the access record will be head+1
			}
			_, err := local.Do(context.Background(), tc.op, tc.req, discard)
			if err == nil || access.Code(err) != tc.code {
				t.Fatalf("%v (code %q), want code %s", err, access.Code(err), tc.code)
			}
			if tc.code == "bad_request" && (!strings.Contains(err.Error(), "the log holds records 1 to") || strings.Contains(err.Error(), "wait")) {
				t.Errorf("%v: does not say that the log ends before the records asked for", err)
			}
		})
	}
}

// TestProofPastTheLogRecordsNothing: a proof of a record past the one the
// request's access record would be is refused before that record, naming
// the records the log holds, and the log's head does not move; one of the
// access record itself is still recorded and told no checkpoint covers
// it. It was refused after its access record, as "bundle: invalid record
// range: seq 50 is beyond the log head 21", each try adding a record.
func TestProofPastTheLogRecordsNothing(t *testing.T) {
	l, local := anchoredLog(t)
	ask := access.Ask{Purpose: "HOPERAT"}
	for _, seq := range []uint64{22, 50, 1 << 62} {
		head, _ := l.Head()
		_, err := local.Do(context.Background(), access.OpProve, access.ProveRequest{Ask: ask, Seq: seq}, discard)
		want := fmt.Sprintf("seq %d: the log holds records 1 to %d (this request's own access record would be %d)", seq, head, head+1)
		if !errors.Is(err, access.ErrBadRequest) || !strings.Contains(err.Error(), want) {
			t.Errorf("seq %d: %v, want a bad request saying %q", seq, err, want)
		}
		if after, _ := l.Head(); after != head {
			t.Errorf("seq %d: the head moved from %d to %d: the refusal was recorded", seq, head, after)
		}
	}
	head, _ := l.Head()
	_, err := local.Do(context.Background(), access.OpProve, access.ProveRequest{Ask: ask, Seq: head + 1}, discard)
	if access.Code(err) != "no_checkpoint" {
		t.Errorf("a proof of the access record itself: %v (code %q), want no_checkpoint", err, access.Code(err))
	}
	if after, _ := l.Head(); after != head+1 {
		t.Errorf("a proof of the access record itself moved the head from %d to %d, want one record", head, after)
	}
}

// TestBundlePastTheLogRecordsNothing: a bundle whose range reaches past
// the record the request's access record would be (head+1) is refused
// before that record, as a proof is, naming the end of the range asked
// for and the records the log holds; the head does not move. A range
// ending at head+1 (the access record itself) is still recorded and told
// no checkpoint covers it. It was refused after its access record, as
// "bundle: invalid record range: records 2..500: 500 is beyond the log
// head 22", each try adding a record.
func TestBundlePastTheLogRecordsNothing(t *testing.T) {
	l, local := anchoredLog(t)
	ask := access.Ask{Purpose: "HOPERAT"}
	fixed := func(n uint64) func(uint64) uint64 { return func(uint64) uint64 { return n } }
	for _, tc := range []struct {
		from  uint64
		to    func(head uint64) uint64 // 0: to the latest checkpoint
		field string                   // the one named; "": served
		named func(head uint64) uint64
	}{
		{2, fixed(500), "to", fixed(500)},
		{0, fixed(1 << 62), "to", fixed(1 << 62)},
		{0, func(head uint64) uint64 { return head + 2 }, "to", func(head uint64) uint64 { return head + 2 }},
		{500, fixed(0), "from", fixed(500)},
		{1, fixed(0), "", nil},
	} {
		head, _ := l.Head()
		to := tc.to(head)
		_, err := local.Do(context.Background(), access.OpBundle, access.BundleRequest{Ask: ask, From: tc.from, To: to}, discard)
		after, _ := l.Head()
		if tc.field == "" {
			if err != nil || after != head+1 {
				t.Errorf("bundle %d..%d: %v, head %d to %d; want served and one record", tc.from, to, err, head, after)
			}
			continue
		}
		want := fmt.Sprintf("%s %d: the log holds records 1 to %d (this request's own access record would be %d)", tc.field, tc.named(head), head, head+1)
		if !errors.Is(err, access.ErrBadRequest) || !strings.Contains(err.Error(), want) {
			t.Errorf("bundle %d..%d: %v, want a bad request saying %q", tc.from, to, err, want)
		}
		if after != head {
			t.Errorf("bundle %d..%d: the head moved from %d to %d: the refusal was recorded", tc.from, to, head, after)
		}
	}
	head, _ := l.Head()
	_, err := local.Do(context.Background(), access.OpBundle, access.BundleRequest{Ask: ask, From: 1, To: head + 1}, discard)
	if access.Code(err) != "no_checkpoint" {
		t.Errorf("a bundle to the access record itself: %v (code %q), want no_checkpoint", err, access.Code(err))
	}
	if after, _ := l.Head(); after != head+1 {
		t.Errorf("a bundle to the access record itself moved the head from %d to %d, want one record", head, after)
	}
}

// TestBundleOfAnOpenPeriodEndsAtTheCheckpoint: a bundle by time whose
// period reaches the log's end (--until after the request's own access
// record, which no checkpoint covers before the request completes) ends at
// the latest checkpoint, as a bundle without an end does; before, it was
// refused with "wait for the next checkpoint and retry", which no retry
// could satisfy (each adds a newer access record).
func TestBundleOfAnOpenPeriodEndsAtTheCheckpoint(t *testing.T) {
	l, dir := openLog(t)
	appendN(t, l, 20)
	signer, _ := testVerifierKeys(t, "custos.test/n1/audit")
	covered := anchorHead(t, l, dir, signer)
	local := access.Local{Service: access.New(l, nil, dir, nil), Caller: alice}
	out := filepath.Join(t.TempDir(), "b")
	req := access.BundleRequest{Ask: access.Ask{Purpose: "HOPERAT"}, Since: time.Now().Add(-time.Hour), Until: time.Now().Add(time.Hour)}
	res, err := local.Do(context.Background(), access.OpBundle, req, func(r io.Reader) error { return access.ReadBundle(r, out) })
	if err != nil {
		t.Fatalf("bundle of an open period: %v", err)
	}
	var m bundle.Manifest
	if b, err := os.ReadFile(filepath.Join(out, bundle.FileManifest)); err != nil || json.Unmarshal(b, &m) != nil {
		t.Fatal(err)
	}
	if m.From != 1 || m.To != uint64(covered) || res.AccessSeq <= m.To {
		t.Fatalf("bundle %d..%d, access record %d, checkpoint %d: want 1..%d", m.From, m.To, res.AccessSeq, covered, covered)
	}
}

// TestComplianceCountsOnlyVerifiedCheckpointsAsSigned: an anchor file
// holding a forged checkpoint (signed under the log's origin by a key the
// verifier keys do not hold) fails the anchor check, and the package's
// per-anchor counts say so: the genuine checkpoint is the one signed, the
// forged one is named as failed, by its line. Until h-policy10 both were
// counted as "signed" and the forged one was the anchor's latest.
func TestComplianceCountsOnlyVerifiedCheckpointsAsSigned(t *testing.T) {
	l, dir := openLog(t)
	appendN(t, l, 10)
	signer, keys := testVerifierKeys(t, "custos.test/access/audit")
	anchorDir := t.TempDir()
	covered := anchorHead(t, l, dir, signer)
	anchorHead(t, l, anchorDir, signer)
	appendN(t, l, 5)
	forger, _ := testVerifierKeys(t, "custos.test/access/audit")
	forged := anchorHead(t, l, anchorDir, forger)
	anchor, err := os.ReadFile((&checkpoint.Anchor{Dir: anchorDir}).Path())
	if err != nil {
		t.Fatal(err)
	}
	local := access.Local{Service: access.New(l, nil, dir, nil), Caller: alice}
	var cr access.ComplianceResult
	_, err = local.Do(context.Background(), access.OpCompliance, access.ComplianceRequest{
		Ask: access.Ask{Purpose: "HOPERAT"}, Retention: 24 * time.Hour, VerifierKeys: keys,
		Anchor: anchor, AnchorName: "elsewhere/checkpoints.jsonl",
	}, func(r io.Reader) (err error) {
		cr, err = access.ReadCompliance(r, filepath.Join(t.TempDir(), "bundle"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ac := cr.Verification.Anchors
	if ac.OK || ac.Error == "" {
		t.Errorf("the anchor check passed with a forged checkpoint: %+v", ac)
	}
	if ac.Checkpoints != 1 || ac.Failed != 1 || ac.LatestSize != covered {
		t.Errorf("anchors: %d signed, %d failed, latest size %d; want 1 signed (size %d), 1 failed (size %d)",
			ac.Checkpoints, ac.Failed, ac.LatestSize, covered, forged)
	}
	if len(ac.Files) != 2 {
		t.Fatalf("files %+v", ac.Files)
	}
	if f := ac.Files[0]; f.Checkpoints != 1 || len(f.Failed) != 0 || f.LatestSize != covered {
		t.Errorf("data directory's file %+v", f)
	}
	want := fmt.Sprintf("line 2 (size %d)", forged)
	if f := ac.Files[1]; f.Checkpoints != 1 || f.LatestSize != covered || len(f.Failed) != 1 || f.Failed[0] != want {
		t.Errorf("anchor file %+v: want 1 signed checkpoint of size %d and %q failed", f, covered, want)
	}
}
