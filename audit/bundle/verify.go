package bundle

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/internal/regularfile"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Transcript is the record of one offline verification of a bundle,
// suitable for attaching to an audit report (Text renders it). OK is true
// exactly when Problems is empty.
type Transcript struct {
	Tool     string          `json:"tool"`
	Version  string          `json:"version"`
	Time     time.Time       `json:"time"`
	Elapsed  time.Duration   `json:"elapsed_ns"`
	Dir      string          `json:"dir"`
	Format   string          `json:"format"`
	Origin   string          `json:"origin"`
	From     uint64          `json:"from"`
	To       uint64          `json:"to"`
	Records  int64           `json:"records"` // lines of records.jsonl examined
	Keys     []string        `json:"keys"`    // verifier keys the signatures were checked against
	Lower    *CheckpointInfo `json:"lower"`   // nil: the empty tree
	Upper    *CheckpointInfo `json:"upper"`
	Checks   []CheckResult   `json:"checks"`
	Problems []Problem       `json:"problems"`
	OK       bool            `json:"ok"`
}

// CheckResult is the outcome of one named check in a Transcript.
type CheckResult struct {
	Name     string `json:"name"`     // a Check* constant
	Ran      bool   `json:"ran"`      // false when a prerequisite was missing (see Detail)
	Problems int    `json:"problems"` // problems this check reported
	Detail   string `json:"detail"`   // what was checked
}

// ToolName names the verifier in transcripts.
const ToolName = "custos audit bundle verify"

// Verify checks the bundle in dir offline — no audit database, no Vault, no
// network — against the note verifier keys vkeys (one per line, as printed
// by `custos checkpoint keys`; blank and # lines ignored). The keys must
// come from a trusted source, not from the bundle. It checks:
//
//   - manifest: manifest.json parses, names only plain file names, every
//     listed file has its sha256, there are no unlisted files, and its
//     counts and sizes agree with the rest;
//   - checkpoint: each line of checkpoints.jsonl (lower, upper; lower
//     omitted for the empty tree) is signed by one of vkeys with the key
//     named like its origin, its body is a strict C2SP checkpoint agreeing
//     with the line, lower.size < upper.size, lower.size <= from-1,
//     upper.size >= to, one origin;
//   - consistency: tlog.CheckTree(proof.consistency, upper, lower);
//   - canonical: every line decodes (audit.Decode) and re-encodes to the
//     identical bytes;
//   - sequence: the seqs are from..to, in order, no gap or duplicate;
//   - chain: each record's prev_hash is the hash of the line before it
//     (ZeroHash for seq 1);
//   - time: record times never decrease;
//   - completeness: RangeRoot(from-1, to, upper.size, leaf hashes of the
//     lines, proof.range) equals upper.root, so the lines are exactly the
//     log's records from..to;
//   - derived: each human-format file present (audit.csv,
//     auditevent.ndjson, ocsf.ndjson) is byte for byte its regeneration
//     from the lines (Format.header, then Format.render of each record,
//     or an earlier custos version's rendering of it, earlierRenderers):
//     the first differing line is reported with the file's name.
//
// Every failure is reported, each with its seq (0 for bundle-level
// problems). Verify returns an error wrapping ErrInvalid when any check
// failed (the Transcript lists them), ErrBadVerifierKey for unusable keys,
// or an I/O error when dir cannot be read at all; the Transcript is filled
// in as far as possible in every case.
func Verify(dir string, vkeys []byte) (Transcript, error) {
	return VerifyProgress(dir, vkeys, nil)
}

// VerifyProgress is Verify that also reports its progress to progress
// (nil: none), from the calling goroutine: the bytes of the bundle's files
// read so far, of a total made when it begins from their sizes (the
// records and every human-format file are read twice: once compared, once
// hashed). The total may move while it runs (a file listed twice, a
// manifest that lies); the last report, when the checks ran, has done ==
// total. The Transcript and the error are Verify's.
func VerifyProgress(dir string, vkeys []byte, progress func(done, total int64)) (Transcript, error) {
	start := time.Now()
	v := &bundleVerifier{dir: dir}
	if progress != nil {
		v.meter = &readMeter{fn: progress}
	}
	v.t = Transcript{
		Tool:     ToolName,
		Version:  toolVersion(),
		Time:     start.UTC(),
		Dir:      dir,
		Problems: []Problem{},
	}
	verifiers, keys, err := parseVerifierKeys(vkeys)
	if err != nil {
		return v.t, err
	}
	v.t.Keys = keys
	if fi, err := os.Stat(dir); err != nil {
		return v.t, err
	} else if !fi.IsDir() {
		return v.t, fmt.Errorf("bundle: %s is not a directory", dir)
	}
	v.run(verifiers)
	v.meter.finish()
	v.t.Elapsed = time.Since(start)
	v.t.OK = len(v.t.Problems) == 0
	if !v.t.OK {
		return v.t, fmt.Errorf("%w: %d problem(s)", ErrInvalid, len(v.t.Problems))
	}
	return v.t, nil
}

type bundleVerifier struct {
	dir string
	t   Transcript

	manifest    *Manifest
	from, to    uint64
	lower       *checkpoint // nil: empty tree
	lowerBad    bool        // a lower line exists but does not parse
	upper       *checkpoint
	proof       *Proof
	leaves      []tlog.Hash
	counts      map[string]int
	recordsHash string // sha256 of records.jsonl as read

	meter *readMeter // nil: no progress reported
}

func (v *bundleVerifier) problem(p Problem) {
	if v.counts == nil {
		v.counts = map[string]int{}
	}
	v.counts[p.Check]++
	v.t.Problems = append(v.t.Problems, p)
}

func (v *bundleVerifier) result(name string, ran bool, detail string) {
	v.t.Checks = append(v.t.Checks, CheckResult{Name: name, Ran: ran, Problems: v.counts[name], Detail: detail})
}

func (v *bundleVerifier) run(vs note.Verifiers) {
	v.readManifest()
	v.readCheckpoints(vs)
	v.readProof()
	v.readRecords() // canonical, sequence, chain, time; fills leaves and recordsHash
	v.checkDigests()
	v.checkConsistency()
	v.checkCompleteness()
	// Order the check list as documented.
	order := []string{CheckManifest, CheckCheckpoint, CheckConsistency, CheckCanonical, CheckSequence, CheckChain, CheckTime, CheckCompleteness, CheckDerived}
	slices.SortStableFunc(v.t.Checks, func(a, b CheckResult) int {
		return slices.Index(order, a.Name) - slices.Index(order, b.Name)
	})
	slices.SortStableFunc(v.t.Problems, func(a, b Problem) int {
		if a.Seq != b.Seq {
			if a.Seq < b.Seq {
				return -1
			}
			return 1
		}
		return slices.Index(order, a.Check) - slices.Index(order, b.Check)
	})
}

// open opens the bundle's file name for reading if it is a regular file:
// anything else is refused without waiting in open(2) (a FIFO put in the
// bundle's place would block the verify forever, and an auditor's script
// would get no verdict at all).
func (v *bundleVerifier) open(name string) (*os.File, error) {
	return regularfile.Open(filepath.Join(v.dir, name), os.O_RDONLY, 0, regularfile.FollowLinks)
}

// readFile reads the bundle's file name as open opens it.
func (v *bundleVerifier) readFile(name string) ([]byte, error) {
	f, err := v.open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

func (v *bundleVerifier) readManifest() {
	b, err := v.readFile(FileManifest)
	if err != nil {
		v.problem(Problem{Check: CheckManifest, Detail: "cannot read manifest.json: " + errText(err)})
		return
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		v.problem(Problem{Check: CheckManifest, Detail: "manifest.json does not parse: " + err.Error()})
		return
	}
	if m.Format != BundleFormat {
		v.problem(Problem{Check: CheckManifest, Expected: BundleFormat, Got: m.Format, Detail: "unknown bundle format"})
	}
	if m.From < 1 || m.To < m.From {
		v.problem(Problem{Check: CheckManifest, Detail: fmt.Sprintf("invalid range from %d to %d", m.From, m.To)})
		return
	}
	if m.Records != int64(m.To-m.From+1) {
		v.problem(Problem{Check: CheckManifest, Expected: fmt.Sprint(m.To - m.From + 1), Got: fmt.Sprint(m.Records), Detail: "records count does not match the range"})
	}
	v.manifest = &m
	v.from, v.to = m.From, m.To
	v.t.Format, v.t.Origin, v.t.From, v.t.To = m.Format, m.Origin, m.From, m.To
}

// checkDigests checks every file listed in the manifest and looks for
// unlisted files. records.jsonl was hashed while it was read.
func (v *bundleVerifier) checkDigests() {
	defer func() {
		v.result(CheckManifest, v.manifest != nil, "manifest.json format, range and counts; sha256 of every listed file; no unlisted files")
	}()
	if v.manifest == nil {
		return
	}
	for _, req := range []string{FileRecords, FileCheckpoints, FileProof} {
		if _, ok := v.manifest.Files[req]; !ok {
			v.problem(Problem{Check: CheckManifest, Detail: req + " is not listed in the manifest"})
		}
	}
	names := make([]string, 0, len(v.manifest.Files))
	for name := range v.manifest.Files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		want := v.manifest.Files[name]
		if name == FileManifest || name != filepath.Base(name) || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
			v.problem(Problem{Check: CheckManifest, Got: name, Detail: "manifest lists a file name that is not a plain bundle file"})
			continue
		}
		var got string
		if name == FileRecords && v.recordsHash != "" {
			got = v.recordsHash
		} else {
			f, err := v.open(name)
			if err != nil {
				v.problem(Problem{Check: CheckManifest, Detail: fmt.Sprintf("listed file %s cannot be read: %s", name, errText(err))})
				continue
			}
			h := sha256.New()
			_, err = io.Copy(h, v.meter.reader(f))
			f.Close()
			v.meter.report()
			if err != nil {
				v.problem(Problem{Check: CheckManifest, Detail: fmt.Sprintf("listed file %s cannot be read: %s", name, errText(err))})
				continue
			}
			got = "sha256:" + hex.EncodeToString(h.Sum(nil))
		}
		if got != want {
			v.problem(Problem{Check: CheckManifest, Expected: want, Got: got, Detail: name + " does not have the manifest's digest"})
		}
	}
	entries, err := os.ReadDir(v.dir)
	if err != nil {
		v.problem(Problem{Check: CheckManifest, Detail: "cannot list the bundle directory: " + errText(err)})
		return
	}
	for _, e := range entries {
		if e.Name() == FileManifest {
			continue
		}
		if _, ok := v.manifest.Files[e.Name()]; !ok {
			v.problem(Problem{Check: CheckManifest, Got: e.Name(), Detail: "file not listed in the manifest"})
		}
	}
	if v.upper != nil {
		if v.manifest.Origin != v.upper.Origin {
			v.problem(Problem{Check: CheckManifest, Expected: v.upper.Origin, Got: v.manifest.Origin, Detail: "manifest origin differs from the checkpoints'"})
		}
		if v.manifest.Upper != v.upper.Size {
			v.problem(Problem{Check: CheckManifest, Expected: fmt.Sprint(v.upper.Size), Got: fmt.Sprint(v.manifest.Upper), Detail: "manifest upper_size differs from the upper checkpoint"})
		}
		lower := int64(0)
		if v.lower != nil {
			lower = v.lower.Size
		}
		if v.manifest.Lower != lower {
			v.problem(Problem{Check: CheckManifest, Expected: fmt.Sprint(lower), Got: fmt.Sprint(v.manifest.Lower), Detail: "manifest lower_size differs from the lower checkpoint"})
		}
	}
}

func (v *bundleVerifier) readCheckpoints(vs note.Verifiers) {
	ran := false
	defer func() {
		v.result(CheckCheckpoint, ran, "signatures by the given keys (key name = origin), strict C2SP bodies, sizes bracket the range")
	}()
	b, err := v.readFile(FileCheckpoints)
	if err != nil {
		v.problem(Problem{Check: CheckCheckpoint, Detail: "cannot read checkpoints.jsonl: " + errText(err)})
		return
	}
	ran = true
	var lines [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			lines = append(lines, l)
		}
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		v.problem(Problem{Check: CheckCheckpoint, Detail: "checkpoints.jsonl does not end in a newline"})
	}
	if len(lines) != 1 && len(lines) != 2 {
		v.problem(Problem{Check: CheckCheckpoint, Expected: "1 or 2 lines", Got: fmt.Sprint(len(lines)), Detail: "checkpoints.jsonl must hold the lower (unless empty tree) and upper checkpoints"})
		if len(lines) == 0 {
			return
		}
	}
	var cks []*checkpoint
	var infos []*CheckpointInfo
	for i, l := range lines {
		which := "upper"
		if len(lines) == 2 && i == 0 {
			which = "lower"
		}
		c, err := parseAnchorLine(l)
		if err != nil {
			v.problem(Problem{Check: CheckCheckpoint, Detail: fmt.Sprintf("%s checkpoint (line %d): %s", which, i+1, err.Error())})
			cks, infos = append(cks, nil), append(infos, nil)
			continue
		}
		signers, err := c.verifySignatures(vs)
		if err != nil {
			v.problem(Problem{Check: CheckCheckpoint, Detail: fmt.Sprintf("%s checkpoint (size %d): signature: %s", which, c.Size, err.Error())})
		}
		info := c.info(signers)
		cks, infos = append(cks, &c), append(infos, &info)
	}
	if len(cks) > 2 {
		return
	}
	upperIdx := len(cks) - 1
	v.upper, v.t.Upper = cks[upperIdx], infos[upperIdx]
	if upperIdx == 1 {
		v.lower, v.t.Lower = cks[0], infos[0]
		if v.lower == nil {
			v.lowerBad = true // unusable lower: the consistency check cannot run
			return
		}
		if v.lower.Size == 0 {
			v.problem(Problem{Check: CheckCheckpoint, Detail: "lower checkpoint of size 0 must be omitted (the empty tree)"})
		}
	}
	if v.upper == nil {
		return
	}
	if v.t.Origin == "" {
		v.t.Origin = v.upper.Origin
	}
	if v.lower != nil {
		if v.lower.Origin != v.upper.Origin {
			v.problem(Problem{Check: CheckCheckpoint, Expected: v.upper.Origin, Got: v.lower.Origin, Detail: "lower and upper checkpoints have different origins"})
		}
		if v.lower.Size >= v.upper.Size {
			v.problem(Problem{Check: CheckCheckpoint, Expected: fmt.Sprintf("lower size < %d", v.upper.Size), Got: fmt.Sprint(v.lower.Size), Detail: "lower checkpoint is not older than the upper one"})
		}
		if v.manifest != nil && v.lower.Size > int64(v.from-1) {
			v.problem(Problem{Check: CheckCheckpoint, Expected: fmt.Sprintf("lower size <= %d", v.from-1), Got: fmt.Sprint(v.lower.Size), Detail: "lower checkpoint already covers records of the range"})
		}
	}
	if v.manifest != nil && v.upper.Size < int64(v.to) {
		v.problem(Problem{Check: CheckCheckpoint, Expected: fmt.Sprintf("upper size >= %d", v.to), Got: fmt.Sprint(v.upper.Size), Detail: "upper checkpoint does not cover the end of the range"})
	}
}

func (v *bundleVerifier) readProof() {
	b, err := v.readFile(FileProof)
	if err != nil {
		v.problem(Problem{Check: CheckConsistency, Detail: "cannot read proof.json: " + errText(err)})
		return
	}
	var p Proof
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		v.problem(Problem{Check: CheckConsistency, Detail: "proof.json does not parse: " + err.Error()})
		return
	}
	v.proof = &p
}

func (v *bundleVerifier) checkConsistency() {
	ran := false
	detail := "the upper checkpoint's tree extends the lower one's (tlog.CheckTree)"
	defer func() { v.result(CheckConsistency, ran, detail) }()
	if v.proof == nil || v.upper == nil || v.lowerBad {
		detail = "not run: proof.json or a checkpoint is unusable"
		return
	}
	ran = true
	if v.lower == nil {
		detail = "lower checkpoint is the empty tree: nothing to prove"
		if len(v.proof.Consistency) != 0 {
			v.problem(Problem{Check: CheckConsistency, Expected: "0 hashes", Got: fmt.Sprint(len(v.proof.Consistency)), Detail: "consistency proof from the empty tree must be empty"})
		}
		return
	}
	if v.lower.Size <= 0 || v.lower.Size >= v.upper.Size {
		v.problem(Problem{Check: CheckConsistency, Detail: fmt.Sprintf("no consistency proof between sizes %d and %d", v.lower.Size, v.upper.Size)})
		return
	}
	if err := tlog.CheckTree(v.proof.Consistency, v.upper.Size, v.upper.Root, v.lower.Size, v.lower.Root); err != nil {
		v.problem(Problem{Check: CheckConsistency, Detail: fmt.Sprintf("tree of size %d (root %v) is not an extension of tree of size %d (root %v): %v",
			v.upper.Size, v.upper.Root, v.lower.Size, v.lower.Root, err)})
	}
}

func (v *bundleVerifier) checkCompleteness() {
	ran := false
	detail := "records.jsonl leaf hashes and the range proof recompute the upper checkpoint's root"
	defer func() { v.result(CheckCompleteness, ran, detail) }()
	if v.proof == nil || v.upper == nil || v.manifest == nil || v.leaves == nil {
		detail = "not run: manifest, proof, upper checkpoint or records unusable"
		return
	}
	ran = true
	from, to := int64(v.from-1), int64(v.to)
	if to > v.upper.Size {
		v.problem(Problem{Check: CheckCompleteness, Detail: fmt.Sprintf("range ends at %d, beyond the upper checkpoint's size %d", to, v.upper.Size)})
		return
	}
	root, err := RangeRoot(from, to, v.upper.Size, v.leaves, v.proof.Range)
	if err != nil {
		v.problem(Problem{Check: CheckCompleteness, Detail: err.Error()})
		return
	}
	if root != v.upper.Root {
		v.problem(Problem{Check: CheckCompleteness, Expected: v.upper.Root.String(), Got: root.String(),
			Detail: fmt.Sprintf("records %d..%d and the range proof do not recompute the root of the signed tree of size %d", v.from, v.to, v.upper.Size)})
	}
}

// lineResult is what the parallel stage computes for one line of
// records.jsonl.
type lineResult struct {
	leaf      tlog.Hash
	hash      string // audit.HashRecord of the line
	decodeErr error
	seq       uint64
	v         int
	time      time.Time
	prevHash  string
	derived   [][]byte // the record rendered in each human format being checked
	renderErr error
	rec       audit.Record // the decoded record (for an earlier renderer, derivedChecker.record)
}

type lineBatch struct {
	lines [][]byte
	res   []lineResult
	done  chan struct{}
}

// readRecords streams records.jsonl, hashing the file, and runs the
// per-record checks. Leaf hashes, record hashes and decoding run on all
// CPUs; the sequential checks run in order here.
func (v *bundleVerifier) readRecords() {
	f, err := v.open(FileRecords)
	if err != nil {
		v.problem(Problem{Check: CheckCanonical, Detail: "cannot read records.jsonl: " + errText(err)})
		for _, c := range []string{CheckCanonical, CheckSequence, CheckChain, CheckTime, CheckDerived} {
			v.result(c, false, "not run: records.jsonl unreadable")
		}
		return
	}
	defer f.Close()
	v.meter.begin(v.dir, v.manifest)
	derived := v.openDerived()
	formats := derived.formats()
	fileHash := sha256.New()
	br := io.TeeReader(v.meter.reader(f), fileHash)

	workers := max(runtime.GOMAXPROCS(0), 1)
	jobs := make(chan *lineBatch, workers)
	order := make(chan *lineBatch, 2*workers)
	for range workers {
		go func() {
			for b := range jobs {
				for i, l := range b.lines {
					b.res[i] = examineLine(l, formats)
				}
				close(b.done)
			}
		}()
	}
	var readErr error
	endsInNewline := true
	go func() {
		defer close(order)
		defer close(jobs)
		// Read blocks of ~1 MiB and cut them into lines; a batch's lines
		// point into its own block (no per-line allocation).
		var carry []byte
		for {
			block := make([]byte, len(carry), len(carry)+1<<20)
			copy(block, carry)
			n, err := io.ReadFull(br, block[len(carry):cap(block)])
			block = block[:len(carry)+n]
			eof := err == io.EOF || err == io.ErrUnexpectedEOF
			if err != nil && !eof {
				readErr = err
			}
			b := &lineBatch{done: make(chan struct{})}
			rest := block
			for {
				i := bytes.IndexByte(rest, '\n')
				if i < 0 {
					break
				}
				b.lines = append(b.lines, rest[:i])
				rest = rest[i+1:]
			}
			carry = rest
			if eof || readErr != nil {
				if len(carry) > 0 {
					b.lines = append(b.lines, carry)
					endsInNewline = false
				}
				carry = nil
			}
			if len(b.lines) > 0 {
				b.res = make([]lineResult, len(b.lines))
				jobs <- b
				order <- b
			}
			if eof || readErr != nil {
				return
			}
		}
	}()

	c := seqChecker{v: v, derived: derived}
	leaves := make([]tlog.Hash, 0, 1024)
	if v.manifest != nil {
		leaves = make([]tlog.Hash, 0, v.to-v.from+1)
	}
	for b := range order {
		<-b.done
		for i := range b.res {
			leaves = append(leaves, b.res[i].leaf)
			c.line(&b.res[i])
		}
		v.meter.report()
	}
	if readErr != nil {
		v.problem(Problem{Check: CheckCanonical, Detail: "reading records.jsonl: " + errText(readErr)})
	}
	if !endsInNewline {
		v.problem(Problem{Seq: c.lastSeq(), Check: CheckCanonical, Detail: "records.jsonl does not end in a newline (truncated?)"})
	}
	c.finish()
	derived.finish()
	v.leaves = leaves
	v.recordsHash = "sha256:" + hex.EncodeToString(fileHash.Sum(nil))
	v.t.Records = c.n
	v.result(CheckCanonical, true, fmt.Sprintf("%d lines decoded with audit.Decode and re-encoded byte for byte", c.n))
	v.result(CheckSequence, v.manifest != nil, "seqs are from..to in order, no gap or duplicate")
	v.result(CheckChain, true, "each prev_hash is the hash of the preceding line (ZeroHash for seq 1)")
	v.result(CheckTime, true, "record times never decrease")
}

func examineLine(l []byte, formats []Format) lineResult {
	r := lineResult{leaf: tlog.RecordHash(l)}
	rec, err := audit.Decode(l)
	if err != nil {
		r.decodeErr = err
		r.hash = audit.HashRecord(l)
		return r
	}
	// Decode sets Hash = audit.HashRecord(l).
	r.seq, r.v, r.time, r.prevHash, r.hash = rec.Seq, rec.V, rec.Time, rec.PrevHash, rec.Hash
	if len(formats) > 0 {
		r.rec = rec
		r.derived = make([][]byte, len(formats))
		for i, f := range formats {
			if r.derived[i], err = f.render(rec); err != nil {
				r.renderErr = err
				break
			}
		}
	}
	return r
}

// seqChecker runs the order-dependent checks over the lines.
type seqChecker struct {
	v        *bundleVerifier
	derived  *derivedChecker
	n        int64
	seen     []uint64 // bitmap over from..to
	prev     *lineResult
	prevSeq  uint64 // seq attributed to the previous line
	lastTime time.Time
	haveTime bool
}

func (c *seqChecker) lastSeq() uint64 { return c.prevSeq }

func (c *seqChecker) line(r *lineResult) {
	v := c.v
	c.n++
	// The seq this line should have; a line that does not decode is
	// attributed to it.
	expect := c.prevSeq + 1
	if c.prev == nil {
		expect = v.from
	}
	seq := expect
	if r.decodeErr != nil {
		v.problem(Problem{Seq: expect, Check: CheckCanonical, Detail: fmt.Sprintf("line %d does not decode canonically: %s", c.n, r.decodeErr.Error())})
		c.mark(expect)
		c.derived.stop(expect)
	} else {
		seq = r.seq
		c.sequence(seq, expect)
		c.derived.record(seq, r.rec, r.derived, r.renderErr)
		// Chain.
		var wantPrev string
		switch {
		case c.prev != nil:
			wantPrev = c.prev.hash
		case seq == 1:
			wantPrev = audit.ZeroHash
		}
		if wantPrev != "" && r.prevHash != wantPrev {
			d := fmt.Sprintf("prev_hash is not the hash of the preceding line (seq %d): this record, or the one before it, was altered, removed or moved", c.prevSeq)
			if c.prev == nil {
				d = "the first record's prev_hash must be the zero hash"
			}
			v.problem(Problem{Seq: seq, Check: CheckChain, Expected: wantPrev, Got: r.prevHash, Detail: d})
		}
		// Time.
		if c.haveTime && r.time.Before(c.lastTime) {
			v.problem(Problem{Seq: seq, Check: CheckTime, Expected: ">= " + c.lastTime.Format(audit.TimeLayout), Got: r.time.Format(audit.TimeLayout), Detail: "record is earlier than the preceding line"})
		}
		c.lastTime, c.haveTime = r.time, true
	}
	c.prev, c.prevSeq = r, seq
}

// mark records seq as held by a line that did not decode, so that it is
// not also reported missing.
func (c *seqChecker) mark(seq uint64) {
	v := c.v
	if v.manifest == nil || seq < v.from || seq > v.to {
		return
	}
	if c.seen == nil {
		c.seen = make([]uint64, (v.to-v.from)/64+1)
	}
	i := seq - v.from
	c.seen[i/64] |= 1 << (i % 64)
}

func (c *seqChecker) sequence(seq, expect uint64) {
	v := c.v
	if v.manifest == nil {
		return
	}
	if seq < v.from || seq > v.to {
		v.problem(Problem{Seq: seq, Check: CheckSequence, Expected: fmt.Sprintf("%d..%d", v.from, v.to), Got: fmt.Sprint(seq), Detail: fmt.Sprintf("line %d holds a record outside the bundle's range", c.n)})
		return
	}
	if c.seen == nil {
		c.seen = make([]uint64, (v.to-v.from)/64+1)
	}
	i := seq - v.from
	if c.seen[i/64]&(1<<(i%64)) != 0 {
		v.problem(Problem{Seq: seq, Check: CheckSequence, Detail: fmt.Sprintf("line %d repeats seq %d", c.n, seq)})
		return
	}
	c.seen[i/64] |= 1 << (i % 64)
	if seq != expect {
		d := fmt.Sprintf("line %d: seq %d follows seq %d", c.n, seq, expect-1)
		if c.prev == nil {
			d = fmt.Sprintf("the first line holds seq %d, the bundle starts at %d", seq, v.from)
		}
		v.problem(Problem{Seq: seq, Check: CheckSequence, Expected: fmt.Sprint(expect), Got: fmt.Sprint(seq), Detail: d})
	}
}

// finish reports the seqs of the range that no line held, as runs.
func (c *seqChecker) finish() {
	v := c.v
	if v.manifest == nil {
		return
	}
	var runStart uint64
	in := false
	flush := func(end uint64) {
		d := fmt.Sprintf("record %d is missing", runStart)
		if end > runStart {
			d = fmt.Sprintf("records %d..%d are missing", runStart, end)
		}
		v.problem(Problem{Seq: runStart, Check: CheckSequence, Detail: d})
	}
	for s := v.from; ; s++ {
		i := s - v.from
		seen := c.seen != nil && c.seen[i/64]&(1<<(i%64)) != 0
		if !seen && !in {
			runStart, in = s, true
		}
		if seen && in {
			flush(s - 1)
			in = false
		}
		if s == v.to {
			break
		}
	}
	if in {
		flush(v.to)
	}
}

// errText renders an I/O error without the directory path it may contain.
func errText(err error) string {
	var nr *regularfile.NotRegularError
	if errors.As(err, &nr) {
		return "it is " + nr.Kind + ", not a regular file"
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	return err.Error()
}

func toolVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Path + "@" + bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			v += " (" + s.Value + ")"
		}
	}
	return v + " " + bi.GoVersion
}

// Text renders the transcript for an audit report, one item a line. A
// bundle is outside input and its manifest is not signed: every line is
// passed through audit.Printable, so that nothing the bundle holds (a
// manifest's format or origin, a file name, a checkpoint's time) can
// break a line, forge a "result:" line or reach the terminal as a control
// sequence.
func (t Transcript) Text() string {
	var b strings.Builder
	line := func(format string, args ...any) {
		b.WriteString(audit.Printable(fmt.Sprintf(format, args...)))
		b.WriteByte('\n')
	}
	line("custos audit bundle verification transcript")
	line("tool:      %s %s", t.Tool, t.Version)
	line("verified:  %s (%s)", t.Time.UTC().Format(time.RFC3339), t.Elapsed.Round(time.Millisecond))
	line("bundle:    %s (format %s)", t.Dir, t.Format)
	line("origin:    %s", t.Origin)
	line("range:     seq %d..%d, %d record line(s)", t.From, t.To, t.Records)
	line("keys:")
	for _, k := range t.Keys {
		line("  %s", k)
	}
	ck := func(name string, c *CheckpointInfo, empty string) {
		if c == nil {
			line("%s %s", name, empty)
			return
		}
		s := fmt.Sprintf("%s size %d root %v", name, c.Size, c.Root)
		if len(c.Signers) > 0 {
			s += fmt.Sprintf(" signed by %s", strings.Join(c.Signers, ", "))
		} else {
			s += " (no verified signature)"
		}
		// The anchor line's time is outside the signed note: say so,
		// after the signers, so that it does not read as signed.
		if c.Time != "" {
			s += fmt.Sprintf(", anchored %s (unsigned)", c.Time)
		}
		line("%s", s)
	}
	ck("lower:    ", t.Lower, "empty tree (size 0)")
	ck("upper:    ", t.Upper, "missing")
	line("checks:")
	for _, c := range t.Checks {
		status := "PASS"
		switch {
		case !c.Ran:
			status = "SKIP"
		case c.Problems > 0:
			status = fmt.Sprintf("FAIL (%d)", c.Problems)
		}
		if !c.Ran && c.Problems > 0 {
			status = fmt.Sprintf("FAIL (%d)", c.Problems)
		}
		line("  %-12s %-9s %s", c.Name, status, c.Detail)
	}
	if len(t.Problems) > 0 {
		line("problems (%d):", len(t.Problems))
		for _, p := range t.Problems {
			line("  %s", p)
		}
	}
	if t.OK && t.Upper != nil {
		line("result:    VERIFIED: records %d..%d are exactly the log's records, committed to by the signed checkpoint of size %d", t.From, t.To, t.Upper.Size)
	} else {
		line("result:    FAILED: %d problem(s)", len(t.Problems))
	}
	return b.String()
}
