package access_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
)

// TestCloseDuringPacedWalk: a paced verify or export rests between its
// chunks without holding the log: Close, called while the walk rests,
// returns at once (not after the walk's remaining rests), and the walk
// then ends with audit.ErrClosed, not a verdict. At a share of 0.1 % each
// rest is the quarter-second bound and a chunk takes milliseconds, so
// 100 ms into the walk it rests. Before, the walk held the log's read lock
// (Log.mu) through its rests: Close waited for the whole walk (5,000
// records, four rests: about a second). Close may still wait for a chunk
// being read (the lock is held while reading): under -race on a loaded
// CI machine one took 115 ms, so the bound is 500 ms, half of what the
// old code took.
func TestCloseDuringPacedWalk(t *testing.T) {
	for _, o := range []struct {
		name string
		op   access.Op
		req  any
	}{
		{"verify", access.OpVerify, access.VerifyRequest{Ask: access.Ask{Purpose: "HOPERAT"}}},
		{"export", access.OpExport, access.ExportRequest{Ask: access.Ask{Purpose: "HOPERAT"}, Format: audit.FormatJSONL}},
	} {
		t.Run(o.name, func(t *testing.T) {
			l, dir := openLog(t)
			appendN(t, l, 5000)
			svc := access.New(l, nil, dir, nil)
			svc.Pace(0.001)
			done := make(chan error, 1)
			go func() {
				_, err := (access.Local{Service: svc, Caller: alice}).Do(context.Background(), o.op, o.req, access.Discard)
				done <- err
			}()
			time.Sleep(100 * time.Millisecond)
			start := time.Now()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if el := time.Since(start); el > 500*time.Millisecond {
				t.Errorf("Close during a paced %s took %v, want it not to wait for the walk's rests", o.name, el)
			}
			select {
			case err := <-done:
				if !errors.Is(err, audit.ErrClosed) {
					t.Errorf("paced %s after Close: %v, want audit.ErrClosed", o.name, err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("paced %s did not end after Close", o.name)
			}
		})
	}
}

// TestPacedVerifyAcrossARoll: a roll (the live segment sealed, a new one
// started) while a paced verify rests does not change its verdict: the
// walk goes on in the segment it was walking, now sealed, and the log is
// found intact.
func TestPacedVerifyAcrossARoll(t *testing.T) {
	l, dir := openLog(t)
	appendN(t, l, 5000)
	svc := access.New(l, nil, dir, nil)
	svc.Pace(0.001)
	done := make(chan error, 1)
	var out bytes.Buffer
	go func() {
		_, err := (access.Local{Service: svc, Caller: alice}).Do(context.Background(), access.OpVerify, access.VerifyRequest{Ask: access.Ask{Purpose: "HOPERAT"}},
			func(r io.Reader) error { _, err := io.Copy(&out, r); return err })
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if ok, err := l.Roll(context.Background()); err != nil || !ok {
		t.Fatalf("Roll = %v, %v", ok, err)
	}
	appendN(t, l, 10)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var res access.VerifyResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if !res.OK || len(res.Problems) != 0 || res.Summary.Records < 5001 {
		t.Errorf("paced verify across a roll: ok %v, %d records, problems %v", res.OK, res.Summary.Records, res.Problems)
	}
}
