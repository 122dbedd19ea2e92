package access_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/report"
)

// TestPacedWalksRest: with Service.Pace, verify, export and report rest
// between chunks of records (a server's auditors leave it the CPUs), and
// answer as the unpaced walk does. 2,500 records are three chunks; at a
// share of 0.1 % each chunk's rest is the quarter-second bound (a chunk
// busy for 0.25 ms or more rests 999 times as long, bounded), so a paced
// walk takes at least half a second where the unpaced one takes
// milliseconds. At 1 % a chunk had to be busy for 2.5 ms to reach the
// bound: on an idle machine a report's chunks were quicker, and the paced
// report took 380-490 ms, failing with pacing working.
func TestPacedWalksRest(t *testing.T) {
	l, dir := openLog(t)
	appendN(t, l, 2500)
	ask := access.Ask{Purpose: "HOPERAT", By: "j.doe"}
	ops := []struct {
		name string
		op   access.Op
		req  any
	}{
		{"verify", access.OpVerify, access.VerifyRequest{Ask: ask}},
		{"export", access.OpExport, access.ExportRequest{Ask: ask, Format: audit.FormatJSONL}},
		{"report", access.OpReport, access.ReportRequest{Ask: ask, Query: report.Query{Denials: true}}},
	}
	for _, o := range ops {
		t.Run(o.name, func(t *testing.T) {
			run := func(share float64) (time.Duration, []byte) {
				svc := access.New(l, nil, dir, nil)
				svc.Pace(share)
				var out bytes.Buffer
				start := time.Now()
				if _, err := (access.Local{Service: svc, Caller: alice}).Do(context.Background(), o.op, o.req, func(r io.Reader) error {
					_, err := io.Copy(&out, r)
					return err
				}); err != nil {
					t.Fatal(err)
				}
				return time.Since(start), out.Bytes()
			}
			fast, plain := run(0)
			slow, paced := run(0.001)
			if slow < 500*time.Millisecond {
				t.Errorf("paced %s took %v (unpaced %v), want at least 500ms: it did not rest", o.name, slow, fast)
			}
			if !sameAnswer(t, o.op, plain, paced) {
				t.Errorf("paced %s answered\n%.300s\nunpaced\n%.300s", o.name, paced, plain)
			}
		})
	}
}

// sameAnswer compares two answers of op made one after the other: each
// appended its own access record, so the later one has one more record.
func sameAnswer(t *testing.T, op access.Op, a, b []byte) bool {
	t.Helper()
	switch op {
	case access.OpVerify:
		var x, y access.VerifyResult
		if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
			return false
		}
		return x.OK && y.OK && y.Summary.Records == x.Summary.Records+1
	case access.OpExport:
		// The later export holds the earlier's access record too.
		return len(b) > len(a) && bytes.Equal(b[:len(a)], a) && bytes.Count(b, []byte("\n")) == bytes.Count(a, []byte("\n"))+1
	}
	// A report: the same rows, one record more scanned.
	var x, y report.Report
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	if y.Scanned != x.Scanned+1 {
		return false
	}
	x.Scanned = y.Scanned
	return reflect.DeepEqual(x, y)
}

// TestPacedWalkStopsWhenCancelled: a paced walk resting when its caller
// goes away stops at once, not after its rest. At a share of 0.1 % each
// rest is the quarter-second bound and a chunk takes milliseconds, so
// 100 ms in the walk is resting: it must return well before that rest
// would have ended (a rest that ignored the cancellation returned 150 ms
// or more after it; the earlier bound, a second from the start, held for
// it too).
func TestPacedWalkStopsWhenCancelled(t *testing.T) {
	l, dir := openLog(t)
	appendN(t, l, 5000)
	svc := access.New(l, nil, dir, nil)
	svc.Pace(0.001)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cancelled time.Time
	stop := time.AfterFunc(100*time.Millisecond, func() { cancelled = time.Now(); cancel() })
	defer stop.Stop()
	_, err := (access.Local{Service: svc, Caller: alice}).Do(ctx, access.OpVerify, access.VerifyRequest{Ask: access.Ask{Purpose: "HOPERAT"}}, access.Discard)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled paced verify: %v, want the context's error", err)
	}
	if el := time.Since(cancelled); el > 100*time.Millisecond {
		t.Errorf("cancelled paced verify returned %v after its cancellation", el)
	}
}

// TestConcurrentPacedWalksShareTheBudget: the paced walks of one Service
// (a server's auditors) share its share of one CPU. At 0.1 % a walk's
// rests (a quarter second after each of its three chunks) are its length,
// so two verifies run at once on one Service take about twice as long as
// one alone: each waits for the other's chunks to be paid too. Before,
// each command was paced on its own: two at once took as long as one and
// used twice the share.
func TestConcurrentPacedWalksShareTheBudget(t *testing.T) {
	l, dir := openLog(t)
	appendN(t, l, 2500)
	svc := access.New(l, nil, dir, nil)
	svc.Pace(0.001)
	verify := func() error {
		var out bytes.Buffer
		_, err := (access.Local{Service: svc, Caller: alice}).Do(context.Background(), access.OpVerify, access.VerifyRequest{Ask: access.Ask{Purpose: "HOPERAT"}},
			func(r io.Reader) error { _, err := io.Copy(&out, r); return err })
		var res access.VerifyResult
		if err == nil && (json.Unmarshal(out.Bytes(), &res) != nil || !res.OK) {
			err = errors.New("verify did not find the log intact: " + out.String())
		}
		return err
	}
	start := time.Now()
	if err := verify(); err != nil {
		t.Fatal(err)
	}
	alone := time.Since(start)
	start = time.Now()
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- verify() }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	both := time.Since(start)
	t.Logf("one alone %v, two at once %v", alone, both)
	if both < alone*16/10 {
		t.Errorf("two paced verifies at once took %v, one alone %v: want about twice as long (one budget), not the same (a share each)", both, alone)
	}
}
