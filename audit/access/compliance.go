package access

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/bundle"
	"github.com/custos-mcp/custos/audit/checkpoint"
	creport "github.com/custos-mcp/custos/compliance/report"
)

// ComplianceRequest is the reading of the log 'custos compliance report'
// does, under one access record (action compliance/report): verify the
// whole log, check the view 1..N against the anchored checkpoints (those
// of the data directory and of Anchor, the lines of another anchor's
// checkpoints.jsonl named AnchorName) with VerifierKeys, scan records 1..N
// for retention (Retention is the configured period), and write the
// export bundle of the period [Since, Until) — all of it by default —
// up to the latest of those checkpoints of size at most N.
type ComplianceRequest struct {
	Ask
	Since        time.Time     `json:"since,omitzero"`
	Until        time.Time     `json:"until,omitzero"`
	Retention    time.Duration `json:"retention"`
	VerifierKeys []byte        `json:"verifier_keys"`
	Anchor       []byte        `json:"anchor,omitempty"`
	AnchorName   string        `json:"anchor_name,omitempty"`
}

// ComplianceResult is what OpCompliance found besides the bundle: the
// first file of its output (ComplianceFile; ReadCompliance).
type ComplianceResult struct {
	AccessSeq uint64    `json:"access_seq"`
	Now       time.Time `json:"now"` // when the view was pinned: the retention status's reference time
	// Verification holds the checks of the whole log and of its anchors;
	// Sources and Bundle are left for the caller, which verifies the
	// bundle itself.
	Verification creport.Verification `json:"verification"`
	// NotCovered are records of the period newer than the latest signed
	// checkpoint of size at most N (the access record among them): they
	// are not in the bundle.
	NotCovered  *creport.SeqRange    `json:"not_covered,omitempty"`
	Retention   creport.Retention    `json:"retention"`
	PolicyLoads []creport.PolicyLoad `json:"policy_loads"`
}

// Names in OpCompliance's output: ComplianceFile first, then the bundle's
// files under BundlePrefix.
const (
	ComplianceFile = "compliance.json"
	BundlePrefix   = "bundle/"
)

// maxComplianceFile bounds ComplianceFile in a stream (a log with many
// problems lists each).
const maxComplianceFile = 256 << 20

func (s *Service) compliance(ctx context.Context, c Caller, r ComplianceRequest, w io.Writer, progress func(Progress)) (Result, error) {
	action, err := r.check(ActionComplianceReport)
	if err != nil {
		return Result{}, err
	}
	if err := checkTimes(r.Since, r.Until); err != nil {
		return Result{}, err
	}
	if r.Retention <= 0 {
		return Result{}, fmt.Errorf("%w: the retention period must be more than 0", ErrBadRequest)
	}
	verifiers, err := checkpoint.ParseVerifierFile(r.VerifierKeys)
	if err != nil {
		return Result{}, fmt.Errorf("%w: verifier keys: %v", ErrBadRequest, err)
	}
	if err := AskedAnchorHolds(r.Anchor, r.AnchorName); err != nil {
		return Result{}, err
	}
	var why subject
	why.time("since", r.Since)
	why.time("until", r.Until)
	why.add("retention", r.Retention.String())
	v, err := s.open(ctx, c, action, r.Ask, why, nil, nil)
	if err != nil {
		return Result{}, err
	}
	res := Result{AccessSeq: v.n}
	out := ComplianceResult{AccessSeq: v.n, Now: s.nowFunc().UTC()}

	// Progress counts the records of three passes: the whole log verified
	// (of the head now), records 1..N scanned, and the bundle's records
	// (at most N until its range is known).
	head, _ := s.log.Head()
	m := s.walkMeter(ctx, progress, int64(max(head, v.n))+2*int64(v.n))

	// The whole log, and the view against its anchors.
	vr, walked, err := s.verifyLog(ctx, m)
	if err != nil {
		return res, err
	}
	m.pass(walked, 2*int64(v.n))
	lc := &out.Verification.Log
	lc.Records, lc.HeadSeq, lc.HeadHash, lc.OK = int64(vr.Summary.Records), vr.Summary.HeadSeq, vr.Summary.HeadHash, vr.OK
	lc.Problems = make([]string, 0, len(vr.Problems))
	for _, p := range vr.Problems {
		lc.Problems = append(lc.Problems, fmt.Sprintf("seq=%d kind=%s expected=%s got=%s %s", p.Seq, p.Kind, p.Expected, p.Got, p.Detail))
	}
	entries, other, err := s.anchorEntries(v, r.Anchor, r.AnchorName)
	if err != nil {
		return res, fmt.Errorf("reading the anchored checkpoints: %w", err)
	}
	ac := &out.Verification.Anchors
	ac.Files = []creport.AnchorFile{anchorFile((&checkpoint.Anchor{Dir: s.dir}).Path(), entries, verifiers)}
	if r.AnchorName != "" {
		ac.Files = append(ac.Files, anchorFile(r.AnchorName, other, verifiers))
	}
	entries = append(entries, other...)
	if _, ok := latestEntry(entries); !ok {
		return res, fmt.Errorf("%w: a compliance package needs one (serve signs one at least every --checkpoint-interval and at shutdown)", errNoCheckpoint)
	}
	signed, failed := bySignature(entries, verifiers)
	ac.Checkpoints, ac.Failed = distinctCheckpoints(signed), len(failed)
	if latest, ok := latestEntry(signed); ok {
		ac.LatestSize, ac.LatestRoot = latest.Size, latest.Root.String()
	}
	if err := checkpoint.CheckAgainst(ctx, v, entries, verifiers); err != nil {
		ac.Error, ac.Cause = err.Error(), anchorCause(err)
	} else {
		ac.OK = true
	}

	// Retention: records 1..N.
	scan := creport.NewLogScan(out.Now.Add(-r.Retention))
	var src bundle.Source = v
	if m != nil {
		src = meteredView{View: v, m: m, from: 1}
	}
	err = src.Records(ctx, 1, v.n, func(seq uint64, canonical []byte) error {
		rec, err := audit.Decode(canonical)
		if err != nil {
			return fmt.Errorf("%w: record %d does not decode: %v (run 'custos audit verify')", audit.ErrCorrupt, seq, err)
		}
		scan.Add(rec)
		return nil
	})
	if err != nil {
		return res, err
	}
	m.pass(int64(v.n), int64(v.n))
	// The tree of the view is the log's (it covers every record, HeadSeq
	// >= N) cut at N.
	out.Retention = scan.Retention(r.Retention, out.Now, v.n, min(vr.Summary.TreeSize, int64(v.n)), ac.OK)
	out.PolicyLoads = scan.PolicyLoads()
	if out.PolicyLoads == nil {
		out.PolicyLoads = []creport.PolicyLoad{}
	}

	// The period's records, up to the latest checkpoint the view can prove
	// against.
	var lines [][]byte
	for _, e := range entries {
		l, err := checkpoint.FormatLine(e)
		if err != nil {
			return res, err
		}
		lines = append(lines, l)
	}
	kept, covered, err := s.provable(v, lines)
	if err != nil {
		return res, err
	}
	from, to := uint64(1), v.n
	if !r.Since.IsZero() || !r.Until.IsZero() {
		if from, to, err = bundle.ResolveTimeRange(ctx, v, r.Since, r.Until); err != nil {
			return res, err
		}
	}
	if to > covered {
		if covered < from {
			return res, fmt.Errorf("%w: no signed checkpoint covers the period yet (records %d..%d; the latest checkpoint is at size %d): try again after the next checkpoint", errNoCheckpoint, from, to, covered)
		}
		out.NotCovered = &creport.SeqRange{From: covered + 1, To: to}
		to = covered
	}
	first, err := json.Marshal(out)
	if err != nil {
		return res, err
	}
	m.pass(0, int64(to-from+1))
	src = v
	if m != nil {
		src = meteredView{View: v, m: m, from: from}
	}
	man, err := s.sendBundle(ctx, src, bundle.WriteOptions{
		From: from, To: to, Checkpoints: kept,
		Formats: []bundle.Format{bundle.FormatCSV, bundle.FormatFHIR, bundle.FormatOCSF},
	}, func(dir string) error {
		tw := tar.NewWriter(w)
		if err := tarBytes(tw, ComplianceFile, first); err != nil {
			return err
		}
		if err := tarDir(tw, dir, BundlePrefix); err != nil {
			return err
		}
		return tw.Close()
	})
	res.Records = int(man.Records)
	if err == nil {
		m.finish(int64(to - from + 1))
	}
	return res, err
}

// AskedAnchorHolds refuses (ErrBadRequest), before the access record, an
// anchor asked for (name set) whose lines hold no checkpoint: the package
// would name it among the sources of the checkpoints checked and pass when
// only the data directory's were (an anchor not mounted, the wrong
// directory, or its checkpoints removed). Lines that do not read are left
// to anchorEntries, which reports them. OpCompliance checks it; the
// command checks it too, before it prints anything.
func AskedAnchorHolds(anchor []byte, name string) error {
	if name == "" {
		return nil
	}
	if es, err := checkpoint.ReadEntries(bytes.NewReader(anchor), name); err == nil && len(es) == 0 {
		return fmt.Errorf("%w: the anchor asked for was not checked: %s is missing or holds no checkpoint (an anchor directory not mounted, the wrong directory, or its checkpoints removed); nothing was read: name the anchor that holds the checkpoints, or leave it out for a package checked against the data directory's alone", ErrBadRequest, name)
	}
	return nil
}

// anchorFile is what the anchor file path held: entries (of size at most
// the view's end), counted apart from the other files'. Only a checkpoint
// whose signed note verifies (and says the size and root of its line)
// counts as signed and as the latest; the others are named as failed.
func anchorFile(path string, entries []checkpoint.Entry, verifiers note.Verifiers) creport.AnchorFile {
	signed, failed := bySignature(entries, verifiers)
	f := creport.AnchorFile{Path: path, Checkpoints: distinctCheckpoints(signed), Failed: []string{}}
	if latest, ok := latestEntry(signed); ok {
		f.LatestSize, f.LatestRoot = latest.Size, latest.Root.String()
	}
	for _, e := range failed {
		f.Failed = append(f.Failed, fmt.Sprintf("%s (size %d)", entryPlace(e), e.Size))
	}
	return f
}

// bySignature splits entries into those whose signed note verifies with
// verifiers and names the size and root of its line, and the others (a
// forged, altered or unknown-key note).
func bySignature(entries []checkpoint.Entry, verifiers note.Verifiers) (signed, failed []checkpoint.Entry) {
	for _, e := range entries {
		c, _, err := checkpoint.Open(e.Note, verifiers)
		if err == nil && c.Size == e.Size && c.Root == e.Root {
			signed = append(signed, e)
		} else {
			failed = append(failed, e)
		}
	}
	return signed, failed
}

// entryPlace is where e is in its file: its line, or its byte offset.
func entryPlace(e checkpoint.Entry) string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d", e.Line)
	}
	return fmt.Sprintf("byte offset %d", e.Offset)
}

// ReadCompliance reads OpCompliance's output: it returns the
// ComplianceResult and unpacks the bundle into the new directory dir (as
// ReadBundle: complete or absent).
func ReadCompliance(r io.Reader, dir string) (ComplianceResult, error) {
	var out ComplianceResult
	tr := tar.NewReader(r)
	h, err := tr.Next()
	if err != nil {
		return out, fmt.Errorf("access: compliance stream: %w", err)
	}
	if h.Name != ComplianceFile || h.Typeflag != tar.TypeReg || h.Size < 0 || h.Size > maxComplianceFile {
		return out, fmt.Errorf("access: compliance stream: unexpected first entry %q", h.Name)
	}
	var tmp ComplianceResult
	if err := json.NewDecoder(io.LimitReader(tr, h.Size)).Decode(&tmp); err != nil {
		return out, fmt.Errorf("access: compliance stream: %s: %w", ComplianceFile, err)
	}
	t, err := NewBundleTarget(dir)
	if err != nil {
		return out, err
	}
	if err := t.unpack(tr, BundlePrefix); err != nil {
		return out, err
	}
	return tmp, nil
}
