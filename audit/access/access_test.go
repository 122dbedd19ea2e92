package access_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/audit/bundle"
	"github.com/custos-mcp/custos/audit/report"
)

var alice = access.Caller{Account: "os:uid=1000(alice)", Source: "local"}

// appendN appends n server-like records, from 32 goroutines (group
// commit).
func appendN(t *testing.T, l *audit.Log, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			for i := w; i < n; i += 32 {
				if _, err := l.Append(context.Background(), audit.Entry{Action: audit.ActionResourcesRead, Outcome: audit.OutcomeAllow, Reason: fmt.Sprint("r", i)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// openLog is a test log and its data directory.
func openLog(t *testing.T) (*audit.Log, string) {
	l, path := audittest.Open(t, audit.Options{Node: "n1"})
	return l, filepath.Dir(path)
}

func lastRecord(t *testing.T, l *audit.Log) audit.Record {
	t.Helper()
	head, _ := l.Head()
	var rec audit.Record
	err := l.Records(context.Background(), head, head, func(_ uint64, c []byte) (err error) {
		rec, err = audit.Decode(c)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestAccessRecordIsWrittenFirst: every operation appends its access
// record, with who, why and what, and reads the prefix that ends at it.
func TestAccessRecordIsWrittenFirst(t *testing.T) {
	l, dir := openLog(t)
	appendN(t, l, 5)
	local := access.Local{Service: access.New(l, nil, dir, nil), Caller: alice}
	ctx := context.Background()

	var out bytes.Buffer
	res, err := local.Do(ctx, access.OpExport, access.ExportRequest{Ask: access.Ask{Purpose: "HOPERAT", By: "j.doe"}, Format: audit.FormatJSONL}, func(r io.Reader) error {
		_, err := io.Copy(&out, r)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.AccessSeq != 6 || res.Records != 6 {
		t.Fatalf("result %+v: want the access record at 6 and records 1..6 exported", res)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 6 || !strings.Contains(lines[5], `"action":"audit/export"`) {
		t.Fatalf("export ends with %q, want the access record last", lines[len(lines)-1])
	}
	rec := lastRecord(t, l)
	if rec.Action != access.ActionExport || rec.PurposeOfUse != "HOPERAT" || rec.Principal.Sub != alice.Account ||
		rec.Principal.ClientID != access.ClientID || rec.Source != "local" || rec.Reason != "by=j.doe format=jsonl" || rec.Outcome != audit.OutcomeAllow {
		t.Fatalf("access record %+v", rec)
	}

	// A patient is named by its lookup value, as in every record.
	hk := "hk1-0123456789abcdef0123456789abcdef"
	if _, err := local.Do(ctx, access.OpHash, access.HashRequest{Ask: access.Ask{Purpose: "PATRQT"}, Patient: hk, Keys: []string{"audit-hmac=dev:file"}}, access.Discard); err != nil {
		t.Fatal(err)
	}
	rec = lastRecord(t, l)
	if rec.Action != access.ActionHash || len(rec.Patients) != 1 || rec.Patients[0] != hk || rec.Reason != "patient="+hk || rec.Keys[0] != "audit-hmac=dev:file" {
		t.Fatalf("hash access record %+v", rec)
	}
	// A value keyed with a development key is marked as such, like every
	// record naming one (docs/audit-format.md, section 1); before, such an
	// access record had dev false (found by probe-verify).
	if !rec.Dev {
		t.Errorf("hash access record under a dev key has dev false: %+v", rec)
	}
	if _, err := local.Do(ctx, access.OpHash, access.HashRequest{Ask: access.Ask{Purpose: "PATRQT"}, Patient: hk, Keys: []string{"audit-hmac=secret/custos/audit-hmac-key@2"}}, access.Discard); err != nil {
		t.Fatal(err)
	}
	if rec = lastRecord(t, l); rec.Dev {
		t.Errorf("hash access record under a Vault key has dev true: %+v", rec)
	}
	if rec := firstAccess(t, l); rec.Dev {
		t.Errorf("an access record naming no key has dev true: %+v", rec)
	}
	// Never a raw id.
	_, err = local.Do(ctx, access.OpHash, access.HashRequest{Ask: access.Ask{Purpose: "PATRQT"}, Patient: "0b5c1f7e-3c2a-4d7e-9f10-2a3b4c5d6e7f"}, access.Discard)
	if !errors.Is(err, access.ErrBadRequest) {
		t.Fatalf("raw patient id: %v, want ErrBadRequest", err)
	}
}

// TestPurposeIsRequired: every operation but verify needs a purpose of
// use; verify defaults to HOPERAT. A refused request records nothing.
func TestPurposeIsRequired(t *testing.T) {
	l, dir := openLog(t)
	appendN(t, l, 2)
	local := access.Local{Service: access.New(l, nil, dir, nil), Caller: alice}
	ctx := context.Background()
	_, keys := testVerifierKeys(t, "custos.test/access/audit")
	reqs := map[access.Op]any{
		access.OpExport:     access.ExportRequest{Format: audit.FormatCSV},
		access.OpBundle:     access.BundleRequest{},
		access.OpReport:     access.ReportRequest{Query: report.Query{Denials: true}},
		access.OpProve:      access.ProveRequest{Seq: 1},
		access.OpHash:       access.HashRequest{Patient: "hk1-0123456789abcdef0123456789abcdef"},
		access.OpImpact:     access.ImpactRequest{},
		access.OpCompliance: access.ComplianceRequest{Retention: time.Hour, VerifierKeys: keys},
	}
	for op, req := range reqs {
		_, err := local.Do(ctx, op, req, access.Discard)
		if !errors.Is(err, access.ErrBadRequest) || access.Code(err) != "bad_request" {
			t.Errorf("%s without a purpose: %v, want bad_request", op, err)
		}
	}
	for _, p := range []string{"treat", "HOP ERAT", "X", "HOPRAT", "AUDIT"} { // the last two: well formed, but no ActReason code
		if _, err := local.Do(ctx, access.OpExport, access.ExportRequest{Ask: access.Ask{Purpose: p}, Format: audit.FormatCSV}, access.Discard); !errors.Is(err, access.ErrBadRequest) {
			t.Errorf("purpose %q: %v, want ErrBadRequest", p, err)
		}
	}
	// An anchor without verifier keys, or keys that hold none, would skip
	// the anchor check or report a sound log as broken: refused, whoever
	// the client (the CLI checks too).
	for name, req := range map[string]access.VerifyRequest{
		"anchor without keys":   {Anchor: []byte("{}\n"), AnchorName: "elsewhere/checkpoints.jsonl"},
		"anchor name, no keys":  {AnchorName: "elsewhere/checkpoints.jsonl"},
		"keys that hold no key": {VerifierKeys: []byte("\n"), AnchorName: "elsewhere/checkpoints.jsonl"},
	} {
		if _, err := local.Do(ctx, access.OpVerify, req, access.Discard); !errors.Is(err, access.ErrBadRequest) {
			t.Errorf("verify, %s: %v, want ErrBadRequest", name, err)
		}
	}
	if head, _ := l.Head(); head != 2 {
		t.Fatalf("refused requests appended records: head %d", head)
	}
	var res access.VerifyResult
	if _, err := local.Do(ctx, access.OpVerify, access.VerifyRequest{}, func(r io.Reader) error { return decodeJSON(r, &res) }); err != nil {
		t.Fatal(err)
	}
	if rec := lastRecord(t, l); rec.Action != access.ActionVerify || rec.PurposeOfUse != access.DefaultVerifyPurpose {
		t.Fatalf("verify access record %+v", rec)
	}
	if !res.OK || res.Summary.Records != 3 {
		t.Fatalf("verify %+v", res)
	}
}

// failingAppender cannot make a record durable.
type failingAppender struct{}

func (failingAppender) Append(context.Context, audit.Entry) (audit.Record, error) {
	return audit.Record{}, errors.New("disk full")
}

// TestFailClosedWhenNotRecorded: if the access record cannot be written,
// nothing is read: no byte of output, ErrNotRecorded.
func TestFailClosedWhenNotRecorded(t *testing.T) {
	l, dir := openLog(t)
	appendN(t, l, 3)
	local := access.Local{Service: access.New(l, failingAppender{}, dir, nil), Caller: alice}
	ask := access.Ask{Purpose: "HOPERAT"}
	signer, keys := testVerifierKeys(t, "custos.test/access/audit")
	anchorHead(t, l, dir, signer) // so that only the failed append stops the compliance reading
	for op, req := range map[access.Op]any{
		access.OpVerify:     access.VerifyRequest{},
		access.OpExport:     access.ExportRequest{Ask: ask, Format: audit.FormatJSONL},
		access.OpBundle:     access.BundleRequest{Ask: ask},
		access.OpReport:     access.ReportRequest{Ask: ask, Query: report.Query{Denials: true}},
		access.OpProve:      access.ProveRequest{Ask: ask, Seq: 1},
		access.OpImpact:     access.ImpactRequest{Ask: ask},
		access.OpCompliance: access.ComplianceRequest{Ask: ask, Retention: time.Hour, VerifierKeys: keys},
	} {
		var out bytes.Buffer
		_, err := local.Do(context.Background(), op, req, func(r io.Reader) error {
			_, err := io.Copy(&out, r)
			return err
		})
		if !errors.Is(err, access.ErrNotRecorded) || access.Code(err) != "not_recorded" {
			t.Errorf("%s: %v, want ErrNotRecorded", op, err)
		}
		if out.Len() != 0 {
			t.Errorf("%s wrote %d bytes although its access was not recorded", op, out.Len())
		}
	}
	// A closed log cannot record either.
	closed, cdir := openLog(t)
	closed.Close()
	_, err := access.Local{Service: access.New(closed, nil, cdir, nil), Caller: alice}.Do(context.Background(), access.OpVerify, access.VerifyRequest{}, access.Discard)
	if !errors.Is(err, access.ErrNotRecorded) {
		t.Fatalf("closed log: %v", err)
	}
}

// TestPrefixViewWhileAppending: an export and an impact stream read
// exactly 1..N, N being their access record, in chunks of short read
// transactions, while another goroutine keeps appending; records written
// meanwhile are left out, and the bytes are those of the log.
func TestPrefixViewWhileAppending(t *testing.T) {
	l, dir := openLog(t)
	appendN(t, l, 9000) // more than two chunks of 4,096
	local := access.Local{Service: access.New(l, nil, dir, nil), Caller: alice}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var appended atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if _, err := l.Append(context.Background(), audit.Entry{Action: audit.ActionResourcesList, Outcome: audit.OutcomeAllow}); err != nil {
				t.Error(err)
				return
			}
			appended.Add(1)
		}
	}()
	var out bytes.Buffer
	res, err := local.Do(context.Background(), access.OpExport, access.ExportRequest{Ask: access.Ask{Purpose: "HOPERAT"}, Format: audit.FormatJSONL}, func(r io.Reader) error {
		_, err := io.Copy(&out, r)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ires, err := local.Do(context.Background(), access.OpImpact, access.ImpactRequest{Ask: access.Ask{Purpose: "HOPERAT"}}, func(r io.Reader) error {
		src, err := access.ReadImpact(r)
		if err != nil {
			return err
		}
		head, _ := src.Head()
		n := uint64(0)
		for from := uint64(1); from <= head; from += 1000 {
			if err := src.Records(context.Background(), from, min(head, from+999), func(seq uint64, _ []byte) error {
				n++
				if seq != n {
					return fmt.Errorf("seq %d, want %d", seq, n)
				}
				return nil
			}); err != nil {
				return err
			}
		}
		if n != head {
			return fmt.Errorf("impact stream held %d records of 1..%d", n, head)
		}
		return nil
	})
	cancel()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if appended.Load() == 0 {
		t.Fatal("nothing was appended during the reads")
	}
	n := res.AccessSeq
	lines := bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n"))
	if uint64(len(lines)) != n || res.Records != int(n) {
		t.Fatalf("exported %d lines (%d reported), want exactly the prefix 1..%d", len(lines), res.Records, n)
	}
	// Byte for byte the stored records 1..N.
	i := 0
	err = l.Records(context.Background(), 1, n, func(seq uint64, c []byte) error {
		if !bytes.Equal(lines[i], c) {
			return fmt.Errorf("line %d differs from record %d", i+1, seq)
		}
		i++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if ires.AccessSeq <= n || ires.Records != int(ires.AccessSeq) {
		t.Fatalf("impact result %+v after export at %d", ires, n)
	}
}

func decodeJSON(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

// TestCodeOfBadRange: a range past the log's head, or a time range with
// no record, is the caller's mistake (bad_request), not an internal error.
func TestCodeOfBadRange(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("%w: to 999 is beyond the log head 18", bundle.ErrBadRange),
		fmt.Errorf("%w: no record in the time range", bundle.ErrBadRange),
	} {
		if got := access.Code(err); got != "bad_request" {
			t.Errorf("Code(%v) = %q, want bad_request", err, got)
		}
	}
}

// firstAccess is the log's first access record (client custos-cli).
func firstAccess(t *testing.T, l *audit.Log) audit.Record {
	t.Helper()
	var found audit.Record
	head, _ := l.Head()
	err := l.Records(context.Background(), 1, head, func(_ uint64, b []byte) error {
		r, err := audit.Decode(b)
		if err == nil && r.Principal.ClientID == access.ClientID && found.Seq == 0 {
			found = r
		}
		return err
	})
	if err != nil || found.Seq == 0 {
		t.Fatalf("no access record: %v", err)
	}
	return found
}
