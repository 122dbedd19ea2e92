package access

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/bundle"
	"github.com/custos-mcp/custos/audit/checkpoint"
	"github.com/custos-mcp/custos/audit/report"
	"github.com/custos-mcp/custos/backup"
	"github.com/custos-mcp/custos/store"
)

// Op names an auditor operation (the admin socket's path /v1/<op>).
type Op string

// Operations.
const (
	OpVerify Op = "verify" // VerifyRequest -> VerifyResult (JSON)
	OpExport Op = "export" // ExportRequest -> the export's exact bytes
	OpBundle Op = "bundle" // BundleRequest -> the bundle's files as a tar archive
	OpReport Op = "report" // ReportRequest -> report.Report (JSON)
	OpProve  Op = "prove"  // ProveRequest  -> bundle.Inclusion (JSON)
	OpHash   Op = "hash"   // HashRequest   -> nothing: the access record only
	OpImpact Op = "impact" // ImpactRequest -> replay inputs (JSON lines; ReadImpact)
	// OpCompliance: ComplianceRequest -> a tar archive of ComplianceFile
	// (ComplianceResult) and the bundle's files (ReadCompliance).
	OpCompliance Op = "compliance"
	OpBackup     Op = "backup" // BackupRequest -> the backup's files as a tar archive (backup.Receive)
)

// Ops lists every operation.
var Ops = []Op{OpVerify, OpExport, OpBundle, OpReport, OpProve, OpHash, OpImpact, OpCompliance, OpBackup}

// Result is what an operation says besides its output: the access record's
// seq (the end N of the view) and, for exports and bundles, the number of
// records written.
type Result struct {
	AccessSeq uint64 `json:"access_seq"`
	Records   int    `json:"records"`
}

// Service runs the operations on one open audit log, inside the process
// that holds its exclusive lock.
type Service struct {
	log     *audit.Log
	app     Appender
	dir     string // the data directory: its checkpoints.jsonl, and room for temporary bundles
	space   func(need uint64) error
	budget  *budget // Pace: the share of one CPU all its walks use together; nil: not paced
	logger  *slog.Logger
	nowFunc func() time.Time
	// closing is done once Close was called: it ends the walks in
	// flight (run) and refuses new operations.
	closing context.Context
	stop    context.CancelFunc
}

// New returns a Service reading log and appending access records through
// app (nil: log itself). dir is the data directory holding the log's
// anchor file (checkpoints.jsonl). logger receives the operational log
// (nil discards).
func New(log *audit.Log, app Appender, dir string, logger *slog.Logger) *Service {
	if app == nil {
		app = log
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	removeStaleBundles(dir, logger)
	closing, stop := context.WithCancel(context.Background())
	return &Service{log: log, app: app, dir: dir, logger: logger, nowFunc: time.Now, closing: closing, stop: stop}
}

// Close ends s's walks of the log and its backups, for a server that
// shuts down: a walk resting between chunks (Pace) wakes at once and,
// like one reading a chunk, stops before its next read; a backup stops
// at its next write (backup.Write), also inside the audit log's copy, or
// while it waits for the catalog's or grants' lock; the
// operation fails with an error wrapping audit.ErrClosed (no verdict, an
// incomplete output, no backup; its access record stays). Every
// operation that walks the log ends so (verify, export, bundle, report,
// policy impact, compliance report), and backup; prove and hash (a few
// records) are left to finish. Operations begun after Close fail with
// audit.ErrClosed before anything is recorded. A server calls Close
// before it waits for its admin socket's requests (which it did for up
// to 5 s) and before it closes the log. Closing twice is a no-op.
func (s *Service) Close() { s.stop() }

// Closing is done once Close was called. The admin socket ends then the
// writes of the operations Close ends (Op.EndsAtClose) that are blocked
// on a caller who stopped reading: the operation's next write would see
// Close, but a write already blocked would wait for that caller.
func (s *Service) Closing() context.Context { return s.closing }

// errClosing is the cause with which Close cancels an operation's
// context.
var errClosing = errors.New("audit access: the service is closing")

// EndsAtClose reports whether Close ends op (a walk of the log, or a
// backup); prove and hash are short.
func (op Op) EndsAtClose() bool {
	switch op {
	case OpProve, OpHash:
		return false
	}
	return true
}

// LimitSpace has the Service ask space, before each write to a bundle it
// assembles in the data directory, whether need more bytes fit on that
// volume; when space says no, the bundle stops with ErrNoRoom and what
// was written of it is removed. A server passes its audit volume's
// reserve check (ops.DiskWatch.Spare), so that a bundle never takes the
// room kept for refusal records and the shutdown checkpoint. Without it
// (the default, and the CLI's own process, in which nothing else writes
// to the log) only a full volume stops a bundle, also with ErrNoRoom.
// Call it before the first Run.
func (s *Service) LimitSpace(space func(need uint64) error) { s.space = space }

// Pace has the record walks of s's operations (verify, export, bundle, the
// compliance report's passes, report, policy impact's reading) use about
// share of one CPU together, however many run at once (one budget, not one
// share per walk): after each chunk of records, between read transactions,
// a walk rests until the chunk is paid at share, for as long as the chunk
// took × (1-share)/share when it walks alone (at most a quarter second),
// longer while others walk. A server passes
// its admin socket's share (app.AdminOptions.AuditorCPU), so that an
// auditor verifying or exporting a large log beside it leaves the CPUs to
// the reads it serves; the walk takes 1/share as long when the machine is
// idle, longer when it is busy (the chunk's time is wall time). share
// outside (0, 1), the default and the CLI's own process (in which nothing
// else is served), is no pacing. Operations that read no more than a few
// records (prove, hash) and the backup (bound by
// the disk and its receiver) are not paced. Call it before the first Run.
func (s *Service) Pace(share float64) { s.budget = newBudget(share) }

// bundleTemp prefixes the temporary directory of a bundle being assembled
// in the data directory (sendBundle).
const bundleTemp = ".access-bundle-"

// removeStaleBundles removes the bundle directories a process that
// stopped while assembling one (a crash, kill -9) left in dir: each holds
// a copy of records (PHI) that nothing else would ever remove. Only the
// process holding the audit log's exclusive lock creates a Service, and
// only a Service creates such directories, so none of them is in use.
func removeStaleBundles(dir string, logger *slog.Logger) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), bundleTemp) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			logger.Warn("audit access: could not remove a bundle directory left by a stopped process", "dir", e.Name(), "err", err)
			continue
		}
		logger.Info("audit access: removed a bundle directory left by a stopped process", "dir", e.Name())
	}
}

// MsgFailed is the message of the warning Run logs when a request fails
// (with its op, caller and Code); the error itself goes to the caller.
const MsgFailed = "audit access failed"

// Run decodes req (JSON) as op's request, appends the access record, and
// only then runs op on the view 1..N, writing its output to w. A request
// that does not decode or validate fails with ErrBadRequest and nothing
// is recorded; a failed append fails with ErrNotRecorded and nothing is
// read.
func (s *Service) Run(ctx context.Context, c Caller, op Op, req []byte, w io.Writer) (Result, error) {
	return s.RunProgress(ctx, c, op, req, w, nil)
}

// RunProgress is Run that also reports the operation's progress to
// progress (nil: none), from the goroutine that calls RunProgress,
// between its writes to w: verify, export, bundle, compliance and backup
// report it (Progress's units); the other operations are short and report
// none (policy impact's replay, the long part, runs in the caller).
// Progress is reported only after the access record is durable, carries
// counts only, and ends with a report of Total == Done when the
// operation succeeds. The output written to w is Run's, byte for byte.
func (s *Service) RunProgress(ctx context.Context, c Caller, op Op, req []byte, w io.Writer, progress func(Progress)) (Result, error) {
	res, err := s.run(ctx, c, op, req, w, progress)
	if err != nil {
		s.logger.Warn(MsgFailed, "op", string(op), "caller", c.Account, "code", Code(err))
	} else {
		s.logger.Info("audit access", "op", string(op), "caller", c.Account, "access_seq", res.AccessSeq, "records", res.Records)
	}
	return res, err
}

func (s *Service) run(ctx context.Context, c Caller, op Op, req []byte, w io.Writer, progress func(Progress)) (Result, error) {
	if s.closing.Err() != nil {
		return Result{}, fmt.Errorf("%w: the server is shutting down; nothing was recorded or read", audit.ErrClosed)
	}
	if !op.EndsAtClose() {
		return s.runOp(ctx, c, op, req, w, progress)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(s.closing, func() { cancel(errClosing) })()
	res, err := s.runOp(ctx, c, op, req, w, progress)
	// A write the transport ended at Close (Closing) may fail before
	// ctx's own AfterFunc has run.
	if context.Cause(ctx) == errClosing || err != nil && s.closing.Err() != nil {
		// Whatever the walk returned, it did not see the whole log; a
		// backup stopped short of its manifest.
		what := "no verdict"
		if op == OpBackup {
			what = "no backup was taken"
		}
		return res, fmt.Errorf("%w: the server shut down during the %s (%s; run it again)", audit.ErrClosed, op, what)
	}
	return res, err
}

func (s *Service) runOp(ctx context.Context, c Caller, op Op, req []byte, w io.Writer, progress func(Progress)) (Result, error) {
	switch op {
	case OpVerify:
		return with(req, func(r VerifyRequest) (Result, error) { return s.verify(ctx, c, r, w, progress) })
	case OpExport:
		return with(req, func(r ExportRequest) (Result, error) { return s.export(ctx, c, r, w, progress) })
	case OpBundle:
		return with(req, func(r BundleRequest) (Result, error) { return s.bundle(ctx, c, r, w, progress) })
	case OpReport:
		return with(req, func(r ReportRequest) (Result, error) { return s.report(ctx, c, r, w) })
	case OpProve:
		return with(req, func(r ProveRequest) (Result, error) { return s.prove(ctx, c, r, w) })
	case OpHash:
		return with(req, func(r HashRequest) (Result, error) { return s.hash(ctx, c, r) })
	case OpImpact:
		return with(req, func(r ImpactRequest) (Result, error) { return s.impact(ctx, c, r, w) })
	case OpCompliance:
		return with(req, func(r ComplianceRequest) (Result, error) { return s.compliance(ctx, c, r, w, progress) })
	case OpBackup:
		return with(req, func(r BackupRequest) (Result, error) { return s.backup(ctx, c, r, w, progress) })
	}
	return Result{}, fmt.Errorf("%w: unknown operation %q", ErrBadRequest, op)
}

// with decodes req, exactly one JSON object, into an R, refusing unknown
// fields, and calls op. Anything else (empty, null, another value, data
// after the object: "{}{...}" must not run the first and ignore the rest)
// is a bad request, and nothing is recorded.
func with[R any](req []byte, op func(R) (Result, error)) (Result, error) {
	req = bytes.TrimSpace(req)
	if len(req) == 0 {
		return Result{}, fmt.Errorf("%w: the request is empty (want one JSON object)", ErrBadRequest)
	}
	if req[0] != '{' {
		return Result{}, fmt.Errorf("%w: the request is not a JSON object", ErrBadRequest)
	}
	var r R
	d := json.NewDecoder(bytes.NewReader(req))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		return Result{}, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	if d.InputOffset() != int64(len(req)) {
		return Result{}, fmt.Errorf("%w: data after the request's JSON object (at byte %d)", ErrBadRequest, d.InputOffset())
	}
	return op(r)
}

// open appends the access record and pins the view at it.
func (s *Service) open(ctx context.Context, c Caller, action string, a Ask, reason subject, patients, keys []string) (View, error) {
	rec, err := record(ctx, s.app, c, action, a, reason, patients, keys)
	if err != nil {
		return View{}, err
	}
	return NewView(s.log, rec.Seq, rec.Hash), nil
}

func checkTimes(since, until time.Time) error {
	if !since.IsZero() && !until.IsZero() && !until.After(since) {
		return fmt.Errorf("%w: until must be after since", ErrBadRequest)
	}
	return nil
}

// VerifyRequest verifies the log. With VerifierKeys, it also checks the
// tree at N against every checkpoint anchored in the data directory and
// in Anchor (the lines of another anchor's checkpoints.jsonl, named
// AnchorName in errors), as serve does at startup, and the signature of
// every sealed segment's seal (problems of kind seal_mismatch).
type VerifyRequest struct {
	Ask
	VerifierKeys []byte `json:"verifier_keys,omitempty"`
	Anchor       []byte `json:"anchor,omitempty"`
	AnchorName   string `json:"anchor_name,omitempty"`
}

// VerifyResult is the verification's outcome (`audit verify --json`).
type VerifyResult struct {
	OK       bool            `json:"ok"`
	Summary  audit.Summary   `json:"summary"`
	Problems []audit.Problem `json:"problems"`
	Anchor   *AnchorResult   `json:"anchor,omitempty"`
}

// AnchorResult is the check against anchored checkpoints: OK with what
// was Checked, a log that does not match them (Error), or, NotChecked, no
// check made for want of evidence (no anchored checkpoint to check
// against; a log that cannot be opened for writing): neither a pass nor a
// problem found, so `audit verify` reaches no verdict on the anchors.
//
// Cause says why the check failed, for a caller to branch on (Error is
// text for a person, and holds the names of anchor files the caller gave):
// AnchorUnknownKey or AnchorMismatch whenever Error is set. A result from
// a server older than the field has none: read it as AnchorMismatch.
type AnchorResult struct {
	OK         bool   `json:"ok"`
	Checked    string `json:"checked"`
	Error      string `json:"error"`
	Cause      string `json:"cause,omitempty"`
	NotChecked string `json:"not_checked,omitempty"`
}

// The causes of a failed anchor check (AnchorResult.Cause).
const (
	// AnchorUnknownKey: the latest anchored checkpoint carries no
	// signature by a key given (checkpoint.ErrUnknownKey): most likely
	// verifier keys of another signing key version (written before a
	// rotation) or of another origin. Nothing vouches for the log.
	AnchorUnknownKey = "unknown_key"
	// AnchorMismatch: any other failure: the log does not match a
	// checkpoint (a fork, a rollback, an inconsistent tree), a signature
	// by a key given that does not verify, a rollback acknowledgement
	// that does not verify, a malformed checkpoint.
	AnchorMismatch = "mismatch"
)

// anchorCause is AnchorResult.Cause of err, a failed anchor check.
func anchorCause(err error) string {
	if errors.Is(err, checkpoint.ErrUnknownKey) {
		return AnchorUnknownKey
	}
	return AnchorMismatch
}

func (s *Service) verify(ctx context.Context, c Caller, r VerifyRequest, w io.Writer, progress func(Progress)) (Result, error) {
	action, err := r.check(ActionVerify, ActionComplianceReport)
	if err != nil {
		return Result{}, err
	}
	// An anchor to check against needs keys that parse: without them the
	// check the caller asked for would be skipped and the log reported
	// intact (fail open), or a key file holding no key would be reported
	// as a log that does not match its checkpoints. Refused before
	// anything is opened or recorded.
	if len(r.VerifierKeys) == 0 && (len(r.Anchor) > 0 || r.AnchorName != "") {
		return Result{}, fmt.Errorf("%w: an anchor to verify against needs verifier keys (--pubkey)", ErrBadRequest)
	}
	if len(r.VerifierKeys) > 0 {
		if _, err := checkpoint.ParseVerifierFile(r.VerifierKeys); err != nil {
			return Result{}, fmt.Errorf("%w: verifier keys (--pubkey): %v", ErrBadRequest, err)
		}
	}
	var why subject
	why.flag("anchors", len(r.VerifierKeys) > 0)
	v, err := s.open(ctx, c, action, r.Ask, why, nil, nil)
	if err != nil {
		return Result{}, err
	}
	// The walk goes on past N to the log's end: the head now is the
	// better total.
	head, _ := s.log.Head()
	m := s.walkMeter(ctx, progress, int64(max(head, v.n)))
	res, walked, err := s.verifyLog(ctx, m)
	if err != nil {
		return Result{AccessSeq: v.n}, err
	}
	m.finish(walked)
	if len(r.VerifierKeys) > 0 {
		res.Anchor = &AnchorResult{}
		verifiers, err := checkpoint.ParseVerifierFile(r.VerifierKeys)
		var entries, other []checkpoint.Entry
		if err == nil {
			entries, other, err = s.anchorEntries(v, r.Anchor, r.AnchorName)
			entries = append(entries, other...)
		}
		if err == nil {
			err = checkpoint.CheckAgainst(ctx, v, entries, verifiers)
		}
		if noAnchorVerdict(err) {
			// Nothing was checked against the anchors: an error, not
			// a log that does not match them (audit verify exits 2).
			return Result{AccessSeq: v.n}, fmt.Errorf("reading the anchored checkpoints: %w", err)
		}
		switch {
		case err != nil:
			res.Anchor.Error, res.Anchor.Cause, res.OK = err.Error(), anchorCause(err), false
		case len(entries) == 0:
			// Keys given, nothing to check them against: an auditor
			// passing --pubkey expects the anchors checked (a log
			// whose checkpoints.jsonl was removed looked the same as
			// one that was never checkpointed: "consistent with no
			// anchored checkpoint", exit 0).
			res.Anchor.NotChecked, res.OK = s.noCheckpointText(r.AnchorName), false
		default:
			res.Anchor.OK, res.Anchor.Checked = true, checkedText(entries)
			if r.AnchorName != "" && len(other) == 0 {
				// The anchor asked for holds nothing: the data
				// directory's checkpoints, which were checked, do not
				// stand in for it (an anchor not mounted, the wrong
				// directory or its checkpoints removed passed).
				res.Anchor.OK, res.OK = false, false
				res.Anchor.NotChecked = fmt.Sprintf("the anchor asked for was not checked: %s is missing or holds no checkpoint (an anchor directory not mounted, the wrong directory, or its checkpoints removed); the data directory's were checked: consistent with %s", r.AnchorName, checkedText(entries))
			}
			// The sealed segments' seals are signed like checkpoints.
			if ps := s.log.CheckSeals(verifiers); len(ps) > 0 {
				res.Problems, res.OK = append(res.Problems, ps...), false
			}
		}
	}
	return Result{AccessSeq: v.n}, json.NewEncoder(w).Encode(res)
}

// verifyLog verifies the whole log: every record, including those
// appended after the view's end (the log's end is checked in the same
// transaction as its last records), counting the records walked into m
// (nil: none), and returns their number; the caller finishes m.
func (s *Service) verifyLog(ctx context.Context, m *meter) (VerifyResult, int64, error) {
	res := VerifyResult{Problems: []audit.Problem{}}
	var pace func(context.Context, int) error
	var walked int64
	if m != nil {
		pace = func(_ context.Context, n int) error {
			walked += int64(n)
			m.set(walked)
			return nil
		}
	}
	var err error
	res.Summary, err = s.log.VerifyPaced(ctx, func(p audit.Problem) { res.Problems = append(res.Problems, p) }, pace)
	res.OK = err == nil && len(res.Problems) == 0
	return res, walked, err
}

// noAnchorVerdict reports whether err, from reading the checkpoints or
// checking the view against them, means no check was made: the
// checkpoints file could not be read (an I/O error: *fs.PathError, not a
// line that reads but is no checkpoint) or the caller went away. Any other
// error is the anchors' verdict on the log.
func noAnchorVerdict(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// anchorEntries are the checkpoints to check the view against: local,
// those of the data directory of size at most N, and other, those of
// anchor (the lines of another anchor's checkpoints.jsonl, named name in
// errors; "anchor" when unnamed). They are apart so that a caller can
// tell an anchor that holds none.
func (s *Service) anchorEntries(v View, anchor []byte, name string) (local, other []checkpoint.Entry, err error) {
	if local, err = s.anchored(v.n); err != nil {
		return nil, nil, err
	}
	if name == "" {
		name = "anchor"
	}
	if other, err = checkpoint.ReadEntries(bytes.NewReader(anchor), name); err != nil {
		return nil, nil, err
	}
	if other, err = checkpoint.Current(other); err != nil {
		return nil, nil, err
	}
	return local, other, nil
}

// latestEntry is the entry of the largest size (false: none).
func latestEntry(entries []checkpoint.Entry) (checkpoint.Entry, bool) {
	if len(entries) == 0 {
		return checkpoint.Entry{}, false
	}
	latest := entries[0]
	for _, e := range entries[1:] {
		if e.Size > latest.Size {
			latest = e
		}
	}
	return latest, true
}

// checkedText says which checkpoints a verification checked: each
// checkpoint once, though the data directory and an anchor directory both
// hold it (it counted the lines of both files, twice the checkpoints).
func checkedText(entries []checkpoint.Entry) string {
	latest, ok := latestEntry(entries)
	if !ok {
		return "no anchored checkpoint"
	}
	return fmt.Sprintf("%d anchored checkpoints (latest: size %d, root %s)", distinctCheckpoints(entries), latest.Size, latest.Root)
}

// distinctCheckpoints counts the checkpoints of entries, each (size, root)
// once however many files hold it.
func distinctCheckpoints(entries []checkpoint.Entry) int {
	type key struct {
		size int64
		root [32]byte
	}
	distinct := map[key]bool{}
	for _, e := range entries {
		distinct[key{e.Size, e.Root}] = true
	}
	return len(distinct)
}

// noCheckpointText says why there was no anchored checkpoint to check
// against, naming the data directory's checkpoints file (and the anchor's,
// anchorName, when one was given).
func (s *Service) noCheckpointText(anchorName string) string {
	local := (&checkpoint.Anchor{Dir: s.dir}).Path()
	why := local + " holds no checkpoint"
	if _, err := os.Stat(local); errors.Is(err, fs.ErrNotExist) {
		why = local + " does not exist"
	}
	if anchorName != "" {
		// Not a stat: anchorName is the caller's path, relative to its
		// own working directory, not the server's.
		why += ", and " + anchorName + " is missing or holds no checkpoint"
	}
	return "no anchored checkpoint to check the log against: " + why + " (a log never checkpointed by a serving server, or its checkpoints removed)"
}

// anchored reads the data directory's anchored checkpoints of size at most
// n. A torn last line is a checkpoint being written: it is left out.
func (s *Service) anchored(n uint64) ([]checkpoint.Entry, error) {
	es, err := (&checkpoint.Anchor{Dir: s.dir}).All()
	var torn *checkpoint.TornError
	if err != nil && !errors.As(err, &torn) {
		return nil, err
	}
	if es, err = checkpoint.Current(es); err != nil {
		return nil, err
	}
	out := es[:0]
	for _, e := range es {
		if e.Size <= int64(n) {
			out = append(out, e)
		}
	}
	return out, nil
}

// ExportRequest exports the records of the view whose time is in [Since,
// Until) as JSON lines or CSV (audit.Log.Export). An export whose records
// do not all check against the log is written whole and fails with an
// *audit.ExportDamagedError (code export_damaged).
type ExportRequest struct {
	Ask
	Format audit.Format `json:"format"`
	Since  time.Time    `json:"since,omitzero"`
	Until  time.Time    `json:"until,omitzero"`
}

func (s *Service) export(ctx context.Context, c Caller, r ExportRequest, w io.Writer, progress func(Progress)) (Result, error) {
	action, err := r.check(ActionExport, ActionComplianceReport)
	if err != nil {
		return Result{}, err
	}
	if r.Format != audit.FormatJSONL && r.Format != audit.FormatCSV {
		return Result{}, fmt.Errorf("%w: format must be jsonl or csv", ErrBadRequest)
	}
	if err := checkTimes(r.Since, r.Until); err != nil {
		return Result{}, err
	}
	var why subject
	why.add("format", string(r.Format))
	why.time("since", r.Since)
	why.time("until", r.Until)
	v, err := s.open(ctx, c, action, r.Ask, why, nil, nil)
	if err != nil {
		return Result{}, err
	}
	f := audit.Filter{Since: r.Since, Until: r.Until, To: v.n}
	m := s.walkMeter(ctx, progress, int64(v.n))
	if m != nil {
		f.Progress = func(seq uint64) { m.set(int64(seq)) }
	}
	n, err := s.log.Export(ctx, w, r.Format, f)
	if err == nil || errors.Is(err, audit.ErrExportDamaged) {
		// A damaged log's export was still walked and written whole.
		m.finish(int64(v.n))
	}
	return Result{AccessSeq: v.n, Records: n}, err
}

// BundleRequest writes an export bundle of records From..To (or of the
// time range [Since, Until)) of the view, as a tar archive of its files
// (ReadBundle unpacks it). Checkpoints are the anchor lines to choose the
// bracketing checkpoints from; none means the data directory's. Without
// To (explicit or from Until) the range ends at the latest checkpoint of
// size at most N: newer records, the access record among them, are not
// anchored yet.
type BundleRequest struct {
	Ask
	From        uint64          `json:"from,omitempty"`
	To          uint64          `json:"to,omitempty"`
	Since       time.Time       `json:"since,omitzero"`
	Until       time.Time       `json:"until,omitzero"`
	Formats     []bundle.Format `json:"formats,omitempty"`
	Checkpoints [][]byte        `json:"checkpoints,omitempty"`
}

// Bundle errors, mapped to codes (Code).
var (
	errNoCheckpoint       = bundle.ErrNoCheckpoint
	errCheckpointMismatch = bundle.ErrCheckpointMismatch
	errNotEmpty           = bundle.ErrNotEmpty
)

func (s *Service) bundle(ctx context.Context, c Caller, r BundleRequest, w io.Writer, progress func(Progress)) (Result, error) {
	action, err := r.check(ActionExport, ActionComplianceReport)
	if err != nil {
		return Result{}, err
	}
	timed := !r.Since.IsZero() || !r.Until.IsZero()
	if timed && (r.From != 0 || r.To != 0) {
		return Result{}, fmt.Errorf("%w: choose a seq range or a time range, not both", ErrBadRequest)
	}
	if err := checkTimes(r.Since, r.Until); err != nil {
		return Result{}, err
	}
	if r.To != 0 && r.From > r.To {
		return Result{}, fmt.Errorf("%w: from %d is after to %d", ErrBadRequest, r.From, r.To)
	}
	for _, f := range r.Formats {
		if f.FileName() == "" {
			return Result{}, fmt.Errorf("%w: format %q is not one of csv, fhir, ocsf", ErrBadRequest, f)
		}
	}
	// A range reaching past the record this request's access record will
	// be holds records that do not exist and no checkpoint will ever
	// cover: refused before the access record, as a proof is (prove).
	// From <= To when both are given, so To is the end asked for, or From
	// without one. A time range is resolved against the records, after.
	field, last := "to", r.To
	if last == 0 {
		field, last = "from", r.From
	}
	if head, _ := s.log.Head(); last > head+1 {
		return Result{}, fmt.Errorf("%w: %s", ErrBadRequest, pastTheLog(field, last, head))
	}
	var why subject
	why.add("bundle", "1")
	why.uint("from", r.From)
	why.uint("to", r.To)
	why.time("since", r.Since)
	why.time("until", r.Until)
	var fs []string
	for _, f := range r.Formats {
		fs = append(fs, string(f))
	}
	why.add("formats", strings.Join(fs, ","))
	v, err := s.open(ctx, c, action, r.Ask, why, nil, nil)
	if err != nil {
		return Result{}, err
	}
	res := Result{AccessSeq: v.n}
	kept, upto, err := s.provable(v, r.Checkpoints)
	if err != nil {
		return res, err
	}
	from, to := r.From, r.To
	if timed {
		if from, to, err = bundle.ResolveTimeRange(ctx, v, r.Since, r.Until); err != nil {
			return res, err
		}
		// A period that reaches the view's end (no --until, or one after
		// this request's own access record, record N) ends at the latest
		// checkpoint, as a bundle without an end does: no checkpoint
		// covers record N before the request completes, so no retry could
		// serve it.
		if r.Until.IsZero() || to == uint64(v.n) {
			to = min(to, upto)
		}
	}
	if from == 0 {
		from = 1
	}
	if to == 0 {
		to = upto
	}
	if to == 0 || from > to {
		// Name the range asked for (to the log's end when no end was
		// given), not the empty one the checkpoints leave.
		want := r.To
		if want == 0 {
			want = max(from, uint64(v.n))
		}
		return res, fmt.Errorf("%w: records %d..%d: the latest signed checkpoint covers %d records", errNoCheckpoint, from, want, upto)
	}
	var src bundle.Source = v
	mt := s.walkMeter(ctx, progress, int64(to-from+1))
	if mt != nil {
		src = meteredView{View: v, m: mt, from: from}
	}
	m, err := s.sendBundle(ctx, src, bundle.WriteOptions{From: from, To: to, Checkpoints: kept, Formats: r.Formats}, func(dir string) error {
		tw := tar.NewWriter(w)
		if err := tarDir(tw, dir, ""); err != nil {
			return err
		}
		return tw.Close()
	})
	res.Records = int(m.Records)
	if err == nil {
		mt.finish(int64(to - from + 1))
	}
	return res, err
}

// provable returns the checkpoint lines (none: those anchored in the data
// directory) that the view can prove against, of size at most N, and the
// largest of their sizes (0: none).
func (s *Service) provable(v View, lines [][]byte) ([][]byte, uint64, error) {
	if len(lines) == 0 {
		es, err := s.anchored(v.n)
		if err != nil {
			return nil, 0, err
		}
		for _, e := range es {
			l, err := checkpoint.FormatLine(e)
			if err != nil {
				return nil, 0, err
			}
			lines = append(lines, l)
		}
	}
	var upto int64
	kept := lines[:0:0]
	for _, l := range lines {
		e, err := checkpoint.ParseLine(bytes.TrimSpace(l))
		if err != nil || e.Size > int64(v.n) {
			continue
		}
		kept = append(kept, l)
		upto = max(upto, e.Size)
	}
	return kept, uint64(upto), nil
}

// sendBundle writes the bundle o of the view into a temporary directory
// inside the data directory, hands that directory to send (which streams
// its files), and removes it. Each write to the bundle asks s.space
// first; a refusal, or a full volume, fails with ErrNoRoom.
func (s *Service) sendBundle(ctx context.Context, v bundle.Source, o bundle.WriteOptions, send func(dir string) error) (bundle.Manifest, error) {
	tmp, err := os.MkdirTemp(s.dir, bundleTemp)
	if err != nil {
		return bundle.Manifest{}, s.noRoom(err, 0)
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "bundle")
	o.Now = s.nowFunc
	var written uint64
	var refused error
	o.Space = func(need uint64) error {
		if s.space != nil {
			if err := s.space(need); err != nil {
				refused = fmt.Errorf("%w: %v (%d bytes of the bundle written so far); free space on the audit volume or export a shorter range", ErrNoRoom, err, written)
				return refused
			}
		}
		written += need
		return nil
	}
	m, err := bundle.Write(ctx, dir, v, o)
	if err != nil {
		if refused != nil && errors.Is(err, refused) {
			return m, refused
		}
		return m, s.noRoom(err, written)
	}
	return m, send(dir)
}

// noRoom names a full volume (ENOSPC) met while assembling a bundle
// in the data directory: a bundle is assembled there whatever the room of
// the directory it is written to in the end. Other errors are returned
// as they are.
func (s *Service) noRoom(err error, written uint64) error {
	if !errors.Is(err, syscall.ENOSPC) {
		return err
	}
	return fmt.Errorf("%w: the audit volume (%s) is full (%d bytes of the bundle written): %v; free space on the audit volume or export a shorter range: the bundle is assembled there before it is written to --out", ErrNoRoom, s.dir, written, err)
}

// ReportRequest is a privacy officer's report (package report) over the
// view. Patients are lookup values (keyed hashes), never ids; Keys names
// the key version of Patients[0].
type ReportRequest struct {
	Ask
	report.Query
	Patients []string `json:"patients,omitempty"`
	Keys     []string `json:"keys,omitempty"`
}

func (s *Service) report(ctx context.Context, c Caller, r ReportRequest, w io.Writer) (Result, error) {
	action, err := r.check(ActionReport, ActionComplianceReport)
	if err != nil {
		return Result{}, err
	}
	if len(r.Patients) == 0 && r.User == "" && !r.Denials && !r.BreakGlass {
		return Result{}, fmt.Errorf("%w: choose what to report: patient, user, denials or break-glass", ErrBadRequest)
	}
	if r.Disclosures && len(r.Patients) == 0 {
		return Result{}, fmt.Errorf("%w: the accounting of disclosures is for one patient", ErrBadRequest)
	}
	switch {
	case r.Tenant != "" && len(r.Patients) == 0:
		return Result{}, fmt.Errorf("%w: a tenant selects the patient's tenant: it needs a patient", ErrBadRequest)
	case r.Tenant != "" && !store.ValidTenant(r.Tenant):
		return Result{}, fmt.Errorf("%w: the tenant %s is no tenant name ([a-z0-9][a-z0-9-]{0,62})", ErrBadRequest, strconv.Quote(r.Tenant))
	}
	if err := checkTimes(r.Since, r.Until); err != nil {
		return Result{}, err
	}
	var why, patients []string
	sj := subject(why)
	if len(r.Patients) > 0 {
		// The record names the patient as every record does: by one
		// lookup value, the newest (Patients[0]).
		patients = r.Patients[:1]
		sj.add("patient", r.Patients[0])
		sj.add("tenant", r.Tenant)
	}
	sj.add("user", r.User)
	sj.flag("denials", r.Denials)
	sj.flag("break_glass", r.BreakGlass)
	sj.flag("disclosures", r.Disclosures)
	sj.time("since", r.Since)
	sj.time("until", r.Until)
	v, err := s.open(ctx, c, action, r.Ask, sj, patients, r.Keys)
	if err != nil {
		return Result{}, err
	}
	q := r.Query
	q.Patients = r.Patients
	var src report.Source = v
	if m := s.walkMeter(ctx, nil, int64(v.n)); m != nil {
		src = meteredView{View: v, m: m, from: 1}
	}
	rep, err := report.Run(ctx, src, q, v.n, nil)
	if err != nil {
		return Result{AccessSeq: v.n}, err
	}
	return Result{AccessSeq: v.n, Records: rep.Records()}, rep.WriteJSON(w)
}

// ProveRequest proves record Seq against the latest checkpoint of size at
// most N anchored in the data directory.
type ProveRequest struct {
	Ask
	Seq uint64 `json:"seq"`
}

func (s *Service) prove(ctx context.Context, c Caller, r ProveRequest, w io.Writer) (Result, error) {
	action, err := r.check(ActionProve)
	if err != nil {
		return Result{}, err
	}
	if r.Seq == 0 {
		return Result{}, fmt.Errorf("%w: seq is required (records are numbered from 1)", ErrBadRequest)
	}
	// A record past the one this request's access record will be does not
	// exist, and no checkpoint will ever cover it: refused before the
	// access record, from the head's number alone (no record is read; the
	// number is not what an access records: the operational log states it
	// at every open). It was refused after its access record, as
	// "bundle: invalid record range" (TestProofPastTheLogRecordsNothing).
	// Records are only appended, so the view's end is at least head+1, and
	// a seq of at most that is in it.
	if head, _ := s.log.Head(); r.Seq > head+1 {
		return Result{}, fmt.Errorf("%w: %s", ErrBadRequest, pastTheLog("seq", r.Seq, head))
	}
	var why subject
	why.uint("seq", r.Seq)
	v, err := s.open(ctx, c, action, r.Ask, why, nil, nil)
	if err != nil {
		return Result{}, err
	}
	res := Result{AccessSeq: v.n}
	es, err := s.anchored(v.n)
	if err != nil {
		return res, err
	}
	if len(es) == 0 {
		return res, fmt.Errorf("%w: no signed checkpoint yet in %s", errNoCheckpoint, filepath.Join(s.dir, checkpoint.FileName))
	}
	line, err := checkpoint.FormatLine(es[len(es)-1])
	if err != nil {
		return res, err
	}
	in, err := bundle.InclusionProof(ctx, v, r.Seq, line)
	if err != nil {
		return res, err
	}
	b, err := in.JSON()
	if err != nil {
		return res, err
	}
	res.Records = 1
	_, err = w.Write(append(b, '\n'))
	return res, err
}

// pastTheLog says that record seq, asked for as the request's field,
// does not exist in a log whose last record is head, naming the records
// it holds.
func pastTheLog(field string, seq, head uint64) string {
	holds := fmt.Sprintf("records 1 to %d", head)
	if head == 0 {
		holds = "no record yet"
	}
	return fmt.Sprintf("%s %d: the log holds %s (this request's own access record would be %d)", field, seq, holds, head+1)
}

// HashRequest records that a patient's lookup values were computed
// (`audit hash`): the caller computes them with its own keys; the record
// names the patient by Patient (a lookup value) and Keys (its key
// versions).
type HashRequest struct {
	Ask
	Patient string   `json:"patient"`
	Keys    []string `json:"keys,omitempty"`
}

func (s *Service) hash(ctx context.Context, c Caller, r HashRequest) (Result, error) {
	action, err := r.check(ActionHash, ActionComplianceReport)
	if err != nil {
		return Result{}, err
	}
	if r.Patient == "" {
		return Result{}, fmt.Errorf("%w: patient (a lookup value) is required", ErrBadRequest)
	}
	var why subject
	why.add("patient", r.Patient)
	v, err := s.open(ctx, c, action, r.Ask, why, []string{r.Patient}, r.Keys)
	if err != nil {
		return Result{}, err
	}
	return Result{AccessSeq: v.n}, nil
}

// BackupRequest takes an online backup of the data directory (package
// backup): consistent copies of audit.db, catalog.db and grants.db, the
// checkpoints, and a manifest, as a tar archive (backup.Save unpacks,
// verifies and places it). Out is where the caller will write it,
// recorded in the access record's reason.
type BackupRequest struct {
	Ask
	Out string `json:"out,omitempty"`
}

func (s *Service) backup(ctx context.Context, c Caller, r BackupRequest, w io.Writer, progress func(Progress)) (Result, error) {
	action, err := r.check(ActionBackup)
	if err != nil {
		return Result{}, err
	}
	var why subject
	why.add("out", r.Out)
	rec, err := record(ctx, s.app, c, action, r.Ask, why, nil, nil)
	if err != nil {
		return Result{}, err
	}
	var cw *countingWriter
	if progress != nil {
		cw = &countingWriter{w: w, m: newMeter(progress, UnitBytes, backup.EstimateSize(backup.Source{Log: s.log, Dir: s.dir}))}
		w = cw
	}
	m, err := backup.Write(ctx, w, backup.Source{Log: s.log, Dir: s.dir, Access: rec, Now: s.nowFunc})
	if err == nil && cw != nil {
		cw.m.finish(cw.n)
	}
	return Result{AccessSeq: rec.Seq, Records: int(m.Audit.HeadSeq)}, err
}
