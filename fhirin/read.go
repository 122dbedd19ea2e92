package fhirin

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/custos-mcp/custos/internal/regularfile"
)

// Read reads the FHIR input at path (see Detect for the formats) and calls
// yield for every item, in input order (the resources outside Bundles
// before the Bundles' entries: pass), a carrier before the attachments
// lifted out of it, and last, in id order, one Stored item per Binary the
// input links but does not hold (Options.StoredBinary).
//
// A problem with the input is an *Error. Read goes on past one to find the
// others (the next line, Bundle entry or file; a stream error ends its
// file), up to MaxProblems, and then returns them all joined (errors.Join;
// errors.As finds the first). Once it has found one it yields nothing more;
// items already yielded are then not to be imported: the caller stages and
// commits only after Read returns nil. The first error yield returns, or
// ctx's, stops Read at once and is returned as it is.
//
// Read makes two passes. The first indexes what an item depends on that may
// come later in the input: Binary resources, the attachments that link to
// them (a Binary's patient comes from its linking resource) and every
// resource naming a Binary (its label component: the Binary and everything
// naming it share their labels), active Consents that deny (the
// patient's opt-out) and Patients labelled vip (the patient-wide vip). It keeps only ids and labels, never content. The second pass yields. Memory is bounded by
// Options.MaxLine (one line, one Bundle), plus the index.
func Read(ctx context.Context, path string, opts Options, yield func(Item) error) error {
	if opts.Link == nil {
		return errors.New("fhirin: Options.Link is required")
	}
	f, err := Detect(path)
	if err != nil {
		return err
	}
	if f == FormatUnknown {
		if err := notJSON(path); err != nil {
			return err
		}
	}
	srcs, err := sources(path, f, opts.Complete)
	if err != nil {
		return err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rd := &reader{ctx: ctx, opts: opts, log: log, yield: yield, idx: newIndex(), seen: map[string]bool{}}
	err = rd.passes(srcs)
	if errors.Is(err, errTooMany) {
		rd.problems = append(rd.problems, fmt.Errorf("fhirin: more than %d problems; the first %d are listed", MaxProblems, MaxProblems))
	} else if err != nil {
		return err
	}
	if len(rd.problems) > 0 {
		return errors.Join(rd.problems...)
	}
	log.Info("fhirin: read", "format", f.String(), "files", len(srcs), "items", rd.items,
		"skipped_reads", rd.skipped.Reads, "skipped_outcomes", rd.skipped.Outcomes)
	if opts.Skipped != nil {
		*opts.Skipped = rd.skipped
	}
	return nil
}

// notJSON explains a file Detect cannot place when it is plainly not FHIR
// JSON: FHIR XML (by its name, or a first byte '<'), or no content at all.
// It returns nil for anything else, which sources refuses as an unknown
// format.
func notJSON(path string) error {
	name := filepath.Base(path)
	lower := strings.ToLower(name)
	if strings.HasSuffix(lower, ".xml") || strings.HasSuffix(lower, ".xml.gz") {
		return newError(name, "", ErrFormat, "FHIR XML is not supported: custos reads FHIR JSON (Bulk Data NDJSON, Bundles, resources); convert the file to JSON")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil // sources reports it
	}
	defer f.Close()
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	head = bytes.TrimLeft(bytes.TrimPrefix(head[:n], []byte("\xef\xbb\xbf")), " \t\r\n")
	switch {
	case n == 0 || len(head) == 0 && n < 512:
		return newError(name, "", ErrFormat, "empty file")
	case utf16BOM(head):
		return newError(name+":1", "", ErrJSON, errUTF16)
	case gzipMagic(head):
		return newError(name+":1", "", ErrFormat, errGzipped)
	case len(head) > 0 && head[0] == '<':
		return newError(name, "", ErrFormat, "FHIR XML is not supported: custos reads FHIR JSON (Bulk Data NDJSON, Bundles, resources); convert the file to JSON")
	}
	return nil
}

// skim reports whether this pass reads only what the first pass needs
// (indexedTypes, resources that may name a Binary).
func (rd *reader) skim() bool { return !rd.emit && !rd.ctxPass }

// MaxProblems caps how many problems one Read reports.
const MaxProblems = 20

// errTooMany stops reading once MaxProblems problems are known.
var errTooMany = errors.New("too many problems")

func (rd *reader) passes(srcs []source) error {
	bundles, outside := false, false
	for _, s := range srcs {
		bundles = bundles || !s.ndjson || s.wantType == "" || s.wantType == "Bundle"
		outside = outside || s.wantType != "Bundle"
	}
	typed := false // a file of one type other than Bundle: resources outside Bundles
	for _, s := range srcs {
		typed = typed || s.wantType != "" && s.wantType != "Bundle"
	}
	firstDone := false
	switch {
	case bundles && outside && !typed:
		// Files that may hold both (*.json, NDJSON not named for a
		// type): read as the first pass's Bundles, which it is when
		// they hold no resource outside a Bundle (Synthea's directory),
		// and else as collectSearches.
		var err error
		if firstDone, err = rd.firstPassOfBundles(srcs); err != nil {
			return err
		}
	case bundles && outside:
		// Resources outside Bundles, and Bundles whose conditional
		// searches may find them: what those searches are bounds what
		// the passes remember (rememberOutside). This read of the
		// Bundles is not the first pass's, as firstPassOfBundles' is:
		// that pass reads them after the resources outside them, which
		// their searches find, and in input order for the index
		// (TestReadTypedBesideBundlesReadForSearchesFirst).
		if err := rd.collectSearches(srcs); err != nil {
			return err
		}
	}
	rd.remembers = len(rd.searched) > 0
	rd.kindsKnown = rd.kindsKnown || bundles && outside
	if !firstDone {
		if err := rd.pass(srcs); err != nil {
			return err
		}
	}
	rd.kindsKnown = true
	if len(rd.idx.ctxTargets) > 0 {
		// Binaries whose securityContext names a resource other than a
		// Patient: read those resources (whatever the first pass skipped)
		// for their compartment and labels, in the files that may hold
		// them (ctxTypes).
		rd.ctxTypes = map[string]bool{}
		for t := range rd.idx.ctxTargets {
			typ, _, _ := strings.Cut(t, "/")
			rd.ctxTypes[typ] = true
		}
		rd.ctxPass = true
		if err := rd.pass(srcs); err != nil {
			return err
		}
		rd.ctxPass = false
		// A full import retires what its own source lacks, not another
		// source's resources: PlaceContext answers for it (Options).
		if err := rd.idx.ctxStored(rd.opts.PlaceContext); err != nil {
			return err
		}
	}
	errs, err := rd.idx.check(rd.opts.StoredBinary, rd.opts.PlaceBinary, rd.opts.Complete)
	if err != nil {
		return err
	}
	if err := rd.idx.settle(rd.opts.StoredBinary); err != nil {
		return err
	}
	for _, err := range errs {
		if err := rd.problem(err); err != nil {
			return err
		}
	}
	rd.emit = true
	if err := rd.pass(srcs); err != nil {
		return err
	}
	if err := rd.filesUnchanged(srcs); err != nil {
		return err
	}
	for _, it := range rd.idx.storedItems() {
		if err := rd.emitItem(it); err != nil {
			return err
		}
	}
	return nil
}

// pass reads the input once: every resource outside a Bundle first (NDJSON
// lines, resource files, the resources of a file that holds Bundles too),
// then the Bundles, each in input order. A Bundle's conditional search so
// finds what the import's resources outside Bundles write, whatever the
// files are named: until 2026-12-06 files were read in name order, and
// A-bundle.json was read before Practitioner.ndjson, whose Practitioner
// its search did not find (refused, "rename the files"). What the pass
// remembered of those resources (reader.outside) must be what the first
// pass remembered: the passes read them differently (by their head
// alone, or whole), and a Bundle's search must find the same in each.
func (rd *reader) pass(srcs []source) error {
	rd.forgetWritten()
	for _, bundles := range []bool{false, true} {
		rd.bundlePhase = bundles
		for _, s := range srcs {
			if err := rd.problem(rd.readSource(&s)); err != nil {
				return err
			}
		}
		if bundles {
			break
		}
		rd.passSums = append(rd.passSums, rd.outside)
		if rd.outside != rd.passSums[0] && len(rd.problems) == 0 {
			// Fail closed: the Bundles' searches would have found
			// other resources in this pass than in the first.
			return fmt.Errorf("fhirin: internal error: pass %d remembered other resources outside Bundles for the Bundles' conditional searches (%d) than the first pass (%d): nothing is imported", len(rd.passSums), rd.outside.n, rd.passSums[0].n)
		}
	}
	rd.bundlePhase = false
	return nil
}

// firstPassOfBundles reads srcs, none a file of one type but Bundle, as
// the first pass reads its Bundles, collecting their conditional searches
// too (reader.sweep), and reports whether that was the first pass: when no
// file holds a resource outside a Bundle, there is nothing for the pass to
// read before the Bundles, and nothing for their searches to find there.
// Otherwise it was collectSearches (from the first such resource on, it
// only scans: reader.scan), and the pass's index and problems are
// dropped: the first pass proper reads the resources outside Bundles
// first. Until 2026-12-06 such an input was always read once more for its
// searches: a directory of Bundles alone three times, not two
// (TestReadBundlesAloneReadTwice).
//
// The problems it finds in a Bundle read before such a resource may be
// none of the first pass proper's (a search finding two Practitioners of
// the catalog, one of which that resource rewrites without the identifier
// searched), and are dropped with the rest; MaxProblems of them do not end
// Read (the files are read for their searches alone, collectSearches,
// and the passes find the problems there are). Until a later change on
// 2026-12-06 they ended it (errTooMany), and the searches of a Bundle's
// entries after one were not collected: a conditional create there did
// not find the resource outside Bundles it names, and created a second
// (TestReadFirstPassOfBundlesFallbackIsExact).
func (rd *reader) firstPassOfBundles(srcs []source) (bool, error) {
	problems, seen := slices.Clone(rd.problems), maps.Clone(rd.seen)
	// drop forgets what the read learnt but that a file changed while
	// it read it (ErrChanged): what it noted the file holds
	// (reader.kinds) decides what the later reads skip, and those see the
	// file changed no more. Until a later change on 2026-12-06 that was
	// dropped too, and a resource appended to a file of Bundles during
	// that read was left out of an import that succeeded
	// (TestReadFileAppendedDuringFirstPassOfBundles).
	drop := func() error {
		found := rd.problems[len(problems):]
		rd.idx, rd.problems, rd.seen = newIndex(), problems, seen
		for _, p := range found {
			if errors.Is(p, ErrChanged) {
				if err := rd.problem(p); err != nil {
					return err
				}
			}
		}
		return nil
	}
	rd.forgetWritten()
	rd.sweep, rd.bundlePhase = true, true
	defer func() { rd.sweep, rd.bundlePhase, rd.scan = false, false, false }()
	for _, s := range srcs {
		err := rd.problem(rd.readSource(&s))
		if errors.Is(err, errTooMany) {
			// Cut off mid-way: what the files hold (reader.kinds, noted
			// as read) and their searches are not all known yet.
			if err := drop(); err != nil {
				return false, err
			}
			rd.sweep = false
			return false, rd.collectSearches(srcs)
		}
		if err != nil {
			return false, err
		}
	}
	for _, k := range rd.kinds {
		if k&unitKind(false) != 0 {
			return false, drop()
		}
	}
	rd.passSums = append(rd.passSums, rd.outside)
	return true, nil
}

// problem records an input problem (an *Error) and returns nil so reading
// goes on, or errTooMany past MaxProblems; any other error (yield's, ctx's,
// errTooMany) is returned as it is. The second pass finds the first pass's
// problems again: each is recorded once.
func (rd *reader) problem(err error) error {
	e, ok := err.(*Error)
	if !ok {
		return err
	}
	if msg := e.Error(); !rd.seen[msg] {
		if len(rd.problems) == MaxProblems {
			return errTooMany
		}
		rd.seen[msg] = true
		rd.problems = append(rd.problems, e)
	}
	return nil
}

// reader holds one Read's state.
type reader struct {
	ctx   context.Context
	opts  Options
	log   *slog.Logger
	yield func(Item) error
	idx   *index
	emit  bool // second pass: yield items
	// ctxPass: between the two passes, reading only the resources that
	// a Binary's securityContext names (index.ctxTargets, ctxTarget).
	ctxPass bool
	// ctxTypes are the types of the resources ctxPass reads: a file of
	// one type (Observation.ndjson) of none of them is not read again.
	// Before, every file was read and every resource decoded a third
	// time, for one such Binary (an import of 10,000 resources took 60%
	// longer); ctxDecoded counts the resources ctxPass decoded.
	ctxTypes   map[string]bool
	ctxDecoded int
	items      int
	// skipped counts the Bundle entries the pass that yields leaves out
	// on purpose (Options.Skipped).
	skipped Skipped
	// remembers: the input's Bundles make conditional searches
	// (searched), which find the resources outside Bundles
	// (rememberResource); headsOnly: this pass skips the file but for
	// that.
	remembers, headsOnly bool
	// bundlePhase: the pass reads the Bundles (it has read every
	// resource outside a Bundle: pass); scan: collectSearches reads them
	// for their searches alone; sweep: firstPassOfBundles reads them, and
	// resolveConditionals collects their searches as scan does.
	bundlePhase, scan, sweep bool
	// kinds notes, by path, what the files that may hold anything hold
	// (unitKind: Bundles, resources outside them, or both), once the
	// first read of them (collectSearches, or else the first pass) has
	// seen every value (kindsKnown): a later phase skips a file holding
	// none of its own, so a directory of Bundles is not read once more
	// per pass for resources outside Bundles it does not hold.
	kinds      map[string]uint8
	kindsKnown bool
	// searched files the Bundles' conditional searches and the ids of
	// what they find in the catalog (collectSearches): a resource outside
	// a Bundle is remembered only when it is one of them (searchedBy).
	searched map[wroteKey]struct{}
	// outside is what this pass remembered of the resources outside
	// Bundles; passSums the same of each pass so far (pass).
	outside  rememberedSum
	passSums []rememberedSum

	// files are what the first read of each file saw of it (sameFile).
	files map[string]fileIdentity

	problems []error         // the *Errors found so far
	seen     map[string]bool // their messages
	// mentioned caches mentionedLabels' answers from StoredBinary, by
	// patient and Binary id.
	mentioned map[string][]string
	// matched caches Options.Match's answers, by type and search (match).
	matched map[string][]Found
	// wrote holds every resource that the Bundles read so far in this
	// pass wrote or deleted (idKey: 16 bytes each; its compartment as an
	// index into patientList, wroteUnplaced or wroteDeleted), so that a
	// later Bundle's search finds it by _id and no longer finds it by
	// what the catalog held before; written files those with identifiers
	// by identifier search (keyOf a searchKey) as an index into
	// writtenList, writtenMore the other resources of a search that finds
	// several (remember).
	wrote       map[wroteKey]int32
	written     map[wroteKey]int32
	writtenMore map[wroteKey][]int32
	writtenList []writtenResource
	patients    map[string]int32
	patientList []string
}

// indexedTypes are the types the first pass reads whole; of any other
// type it reads only the resources that may name a Binary (mayNameBinary),
// whose mentions join the Binaries' label components (index.join).
// Consent and Patient are read whole for the patient-wide labels (an
// opt-out Consent, a Patient labelled vip: index.consent, patientWide).
var indexedTypes = map[string]bool{"Binary": true, "Consent": true, "Bundle": true,
	"DocumentReference": true, "DiagnosticReport": true, "Media": true, "Patient": true}

func (rd *reader) readSource(s *source) error {
	if s.wantType != "" && (s.wantType == "Bundle") != rd.bundlePhase {
		return nil // a file of one type: the other phase's (pass)
	}
	if s.wantType == "" && rd.kindsKnown && rd.kinds[s.path]&unitKind(rd.bundlePhase) == 0 {
		return nil // it holds nothing of this phase (a file of Bundles alone)
	}
	if rd.skim() && s.wantType != "" && !indexedTypes[s.wantType] && !s.ndjson {
		return nil
	}
	rd.headsOnly = false
	if rd.ctxPass && s.wantType != "" && s.wantType != "Bundle" && !rd.ctxTypes[s.wantType] {
		// A file of one type holds that type alone (another is an
		// error of the second pass). Its resources are remembered all
		// the same, as in every pass, for the Bundles after it.
		if !rd.remembers {
			return nil
		}
		rd.headsOnly = true
	}
	// regularfile.Open opens with O_NONBLOCK: a FIFO put in the file's
	// place (a symlink retargeted after sources listed it as a regular
	// file) does not block open(2), and is refused with anything else that
	// is no regular file (fileSum opens the file the same way).
	// Until a later change on 2026-12-06 a FIFO nobody wrote to hung the
	// import past SIGTERM, and /dev/zero had the hash read it for ever
	// (TestReadFileReplacedByAPipeOrADevice).
	f, err := regularfile.Open(s.path, os.O_RDONLY, 0, regularfile.FollowLinks)
	var nr *regularfile.NotRegularError
	if _, read := rd.files[s.path]; err != nil && read && errors.Is(err, fs.ErrNotExist) {
		return newError(s.name, "", ErrChanged, "the file is gone since the import read it")
	} else if errors.As(err, &nr) {
		return newError(s.name, "", ErrChanged, "no longer a regular file (now a pipe, a socket or a device) since the import listed it")
	} else if err != nil {
		return newError(s.name, "", ErrFormat, "%v", pathErr(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return newError(s.name, "", ErrFormat, "%v", pathErr(err))
	}
	h := sha256.New()
	err = rd.readFile(s, io.TeeReader(f, h), fi.Size())
	if _, ok := err.(*Error); err != nil && !ok {
		return err // yield's, ctx's, errTooMany: Read ends
	}
	_, cerr := io.Copy(h, f) // what a read cut short left
	if cerr != nil {
		cerr = newError(s.name, "", ErrFormat, "read failed: %v", pathErr(cerr))
	} else {
		cerr = rd.sameFile(s, f, fi, h.Sum(nil))
	}
	if cerr != nil {
		if err := rd.problem(err); err != nil {
			return err
		}
		return cerr
	}
	if afterRead != nil {
		afterRead(s.path)
	}
	return err
}

// afterRead, when set (by a test), is called after each read of a file.
var afterRead func(path string)

// fileIdentity is what the reads of a file saw of it: its size before
// the first read and SHA-256 of every byte that read parsed (and of any
// it left), and its Stat after the latest read.
type fileIdentity struct {
	size  int64
	mtime time.Time
	sum   [sha256.Size]byte
	last  os.FileInfo // after the latest read: for filesUnchanged
}

// untouched reports whether the file whose Stat is now is the one the
// latest read saw, unwritten since: the same inode, with the same
// modification and status change times. A write, a rename over it and
// touch -d setting its time back each move one of them (changeTime).
func (id fileIdentity) untouched(now os.FileInfo) bool {
	return os.SameFile(id.last, now) && id.last.ModTime().Equal(now.ModTime()) && changeTime(id.last).Equal(changeTime(now))
}

// sameFile checks that the file f, read as s (fi: its Stat before the
// read, sum: SHA-256 of its bytes, hashed as the read parsed them), did
// not change during the read and is the file every earlier read of the
// import saw. Read reads a file up to four times (collectSearches, the
// passes), each depending on what the earlier ones learnt of it: a .json
// file that gained a Bundle after the first read was taken to hold none,
// and the Bundle was silently left out (found reviewing h-import8). A
// change is an ErrChanged naming the file, never its content; nothing is
// imported, and a run once the file is complete reads it whole.
//
// Between two reads the file is the same when its size and its bytes
// are: the bytes are what each read's result depends on, and those it
// parsed are those it hashed. Its modification time moving alone (touch,
// a backup tool, rsync -t) is no change; until 2026-12-06 it was, and such
// an import failed with ErrChanged (TestReadFileTouchedBetweenReads).
// During one read the size and the time are compared: the first read has
// no bytes to compare with.
func (rd *reader) sameFile(s *source, f *os.File, fi os.FileInfo, sum []byte) error {
	after, err := f.Stat()
	if err != nil {
		return newError(s.name, "", ErrFormat, "%v", pathErr(err))
	}
	id := fileIdentity{size: fi.Size(), mtime: fi.ModTime(), last: after}
	copy(id.sum[:], sum)
	if after.Size() != id.size || !after.ModTime().Equal(id.mtime) {
		return newError(s.name, "", ErrChanged, "the file changed while the import read it")
	}
	if rd.files == nil {
		rd.files = map[string]fileIdentity{}
	}
	first, ok := rd.files[s.path]
	if !ok {
		rd.files[s.path] = id
		return nil
	}
	if first.size != id.size || first.sum != id.sum {
		return newError(s.name, "", ErrChanged, "the file changed between two reads of the import")
	}
	first.last = id.last // for filesUnchanged
	rd.files[s.path] = first
	return nil
}

// filesUnchanged checks, once the last pass has read the input, that no
// file read changed since (its size, or its bytes when it is not
// untouched since its latest read: another inode, or its modification or
// status change time moved): a pass may skip a file that an earlier one
// found holds nothing for it. Until h-review48 only the modification time
// sent it to the bytes, and a change of the same size whose time was set
// back (touch -d, or a file renamed over it with the time tar or rsync -t
// gives) passed (TestReadFileChangedBetweenReads).
func (rd *reader) filesUnchanged(srcs []source) error {
	for _, s := range srcs {
		id, ok := rd.files[s.path]
		if !ok {
			continue
		}
		fi, err := os.Stat(s.path)
		if err != nil {
			return rd.problem(newError(s.name, "", ErrChanged, "the file is gone since the import read it"))
		}
		same := fi.Size() == id.size
		if same && !id.untouched(fi) {
			sum, err := regularfile.Sum256(s.path)
			same = err == nil && sum == id.sum
		}
		if !same {
			if err := rd.problem(newError(s.name, "", ErrChanged, "the file changed since the import read it")); err != nil {
				return err
			}
		}
	}
	return nil
}

// readFile reads the file of s, whose bytes f yields, of size bytes by
// its Stat before the read.
func (rd *reader) readFile(s *source, f io.Reader, size int64) error {
	var r io.Reader = f
	if s.gz {
		zr, err := gzip.NewReader(bufio.NewReaderSize(f, 64<<10))
		if err != nil {
			return newError(s.name, "", ErrGzip, "no gzip header")
		}
		defer zr.Close()
		r = zr
	}
	br := bufio.NewReaderSize(r, 64<<10)
	switch head, _ := br.Peek(2); {
	case utf16BOM(head):
		return newError(where(s, 1), "", ErrJSON, errUTF16)
	case gzipMagic(head):
		return newError(where(s, 1), "", ErrFormat, errGzipped)
	}
	r = br
	if s.ndjson {
		return rd.readNDJSON(s, r)
	}
	if !s.gz && readWhole {
		return rd.readJSONFile(s, br, size)
	}
	return rd.readJSON(s, r)
}

// readJSONFile reads a JSON file of size bytes (s not gzipped), whose bytes
// r yields. A file that is one JSON object (a Bundle, a resource) and no
// larger than MaxLine (after a byte order mark) is read into one slice of
// its size, checked by json.Valid, and that object is the unit read: it is
// what readJSON's decoder would have given, at the same line. Through the
// decoder the object was held twice, in the decoder's buffer (grown by
// doubling to hold it: a 238 MB Bundle's buffer was 256 MB, and the
// buffers it grew through garbage) and in the copy Decode returns,
// and a Bundle's read peaked at 5–8 × its size (docs/benchmarks.md, "A
// large Bundle's memory"). Anything else (a file larger than MaxLine,
// several values, an array, JSON that json.Valid refuses, a file whose
// size is not the one its Stat gave) is read by readJSON from its first
// byte, the bytes already read first, so its items and errors are
// readJSON's, texts, lines and offsets included: nothing is read twice
// from the file, and the file's hash (sameFile) covers the bytes parsed.
func (rd *reader) readJSONFile(s *source, r io.Reader, size int64) error {
	limit := int64(rd.opts.maxLine()) + int64(len(utf8BOM))
	if size < 0 || size > limit {
		return rd.readJSON(s, r)
	}
	data := make([]byte, size+1) // a byte more: a file that grew is not read whole
	n, err := io.ReadFull(r, data)
	data = data[:n]
	switch {
	case err == nil: // it grew: the rest follows
		return rd.readJSON(s, io.MultiReader(bytes.NewReader(data), r))
	case err != io.ErrUnexpectedEOF && err != io.EOF:
		return rd.readJSON(s, io.MultiReader(bytes.NewReader(data), failingReader{err}))
	}
	if err := rd.ctx.Err(); err != nil {
		return err
	}
	body := bytes.TrimPrefix(data, utf8BOM)
	start := skipSpace(body, 0)
	if int64(n) != size || len(body) > rd.opts.maxLine() || start == len(body) || body[start] != '{' || !json.Valid(body) {
		return rd.readJSON(s, bytes.NewReader(data))
	}
	end := len(bytes.TrimRight(body, " \t\r\n"))
	line := 1 + bytes.Count(body[:start], []byte{'\n'})
	return rd.problem(rd.unit(s, line, body[start:end:end], true))
}

// readWhole: readFile reads a JSON file by readJSONFile (a variable: the
// tests read every input through readJSON too, TestBundleReadingAgreesWithPlain).
var readWhole = true

// failingReader fails every read with err: the read error that cut a
// readJSONFile read short, for readJSON to report where it would have.
type failingReader struct{ err error }

func (f failingReader) Read([]byte) (int, error) { return 0, f.err }

// readNDJSON reads one JSON object a line; blank lines are skipped.
func (rd *reader) readNDJSON(s *source, r io.Reader) error {
	// A stream error (gzip cut short) surfaces after the partial line
	// before it: er keeps it, to report it instead of that line's JSON error.
	er := &errReader{r: r}
	sc := bufio.NewScanner(er)
	sc.Buffer(make([]byte, 0, min(64<<10, rd.opts.maxLine())), rd.opts.maxLine())
	line := 0
	for sc.Scan() {
		line++
		// A byte order mark may precede each line's JSON text (RFC 8259
		// lets a parser ignore it): the first, and those of Windows
		// tools' files concatenated.
		b := bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(sc.Bytes()), []byte("\xef\xbb\xbf")))
		if len(b) == 0 {
			continue
		}
		if rd.headsOnly || rd.skim() && s.wantType != "" && !indexedTypes[s.wantType] && !mayNameBinary(b) {
			// The first pass needs only what may name a Binary; a line
			// cut short by a stream error is reported where the second
			// pass reports it (at this line).
			if er.err != nil && !errors.Is(er.err, io.EOF) && !json.Valid(b) {
				return rd.streamErr(s, line, er.err)
			}
			rd.rememberHead(s.wantType, b)
			continue
		}
		if err := rd.ctx.Err(); err != nil {
			return err
		}
		if err := rd.unit(s, line, b, false); err != nil {
			if er.err != nil && !errors.Is(er.err, io.EOF) {
				return rd.streamErr(s, line, er.err)
			}
			if err := rd.problem(err); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return rd.streamErr(s, line+1, err)
	}
	return nil
}

// streamErr classifies a read error of a source.
func (rd *reader) streamErr(s *source, line int, err error) error {
	switch {
	case errors.Is(err, bufio.ErrTooLong):
		return newError(where(s, line), "", ErrLineTooLong, "longer than %d bytes", rd.opts.maxLine())
	case errors.Is(err, errValueTooLong):
		return newError(where(s, line), "", ErrValueTooLong, "a JSON value (a Bundle or a resource) of more than %d bytes (%s), over the limit on one value that the reader holds whole; split it into smaller Bundles, or export the data as NDJSON (one resource a line)", rd.opts.maxLine(), mib(rd.opts.maxLine()))
	case s.gz && (errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) || errors.Is(err, io.ErrUnexpectedEOF)):
		return newError(where(s, line), "", ErrGzip, "corrupt or cut short")
	}
	return newError(where(s, line), "", ErrFormat, "read failed: %v", pathErr(err))
}

func where(s *source, line int) string { return s.name + ":" + itoa(line) }

// errValueTooLong is returned by limitReader when one JSON value exceeds MaxLine.
var errValueTooLong = errors.New("value too long")

// countReader counts bytes and newlines read, and fails once more than max
// bytes have been read since mark: a JSON value larger than MaxLine.
type countReader struct {
	r         io.Reader
	off, mark int64
	lines     int64
	max       int64
}

func (c *countReader) Read(p []byte) (int, error) {
	left := c.max - (c.off - c.mark)
	if left < 0 {
		return 0, errValueTooLong
	}
	// Read at most one byte past max: a decoder whose buffer has grown
	// (it doubles) asks for up to its size at once, and a value past max
	// that one read brought in whole was read (a 108 MiB Bundle against
	// 96 MiB, in 678 MB).
	if int64(len(p)) > left+1 {
		p = p[:left+1]
	}
	n, err := c.r.Read(p)
	c.off += int64(n)
	c.lines += int64(bytes.Count(p[:n], []byte{'\n'}))
	return n, err
}

// readJSON reads a stream of JSON values: one resource or Bundle, several
// concatenated, or arrays of them.
//
// A json.Decoder keeps the buffer it grew to hold a value (its capacity
// the value's size rounded up to a power of two) for as long as it reads:
// a top-level value's own bytes (raw, a copy) were then held twice while
// the value was read, and a 238 MB Bundle's read held 256 MB of buffer
// beside it (docs/benchmarks.md, "A large Bundle's memory"). Once a
// top-level value of at least releaseAfter bytes is decoded, the decoder is
// replaced by one reading what the old one had read ahead and then the
// rest of the stream (release), so only raw stays. A value inside a
// top-level array keeps the decoder: a new one would not know it reads an
// array.
func (rd *reader) readJSON(s *source, r io.Reader) error {
	cr := &countReader{r: skipBOM(bufio.NewReaderSize(r, 64<<10)), max: int64(rd.opts.maxLine())}
	dec := json.NewDecoder(cr)
	// base is the offset in the stream at which dec began reading: a
	// decoder's offsets (InputOffset) are its own.
	var base int64
	// lineOf returns the line of the value that just ended at
	// dec.InputOffset() and is len(raw) bytes long: the newlines read, less
	// those still buffered ahead, less those inside the value.
	lineOf := func(raw []byte) int {
		var ahead newlineCounter
		_, _ = io.Copy(&ahead, dec.Buffered()) // a *bytes.Reader: WriteTo, no copy
		return int(cr.lines-int64(ahead)-int64(bytes.Count(raw, []byte{'\n'}))) + 1
	}
	decodeOne := func(top bool) (json.RawMessage, int, error) {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, 0, rd.jsonStreamErr(s, cr, dec, base, err)
		}
		line := lineOf(raw)
		if top && len(raw) >= releaseAfter {
			dec, cr, base = release(dec, cr, base)
		}
		cr.mark = base + dec.InputOffset()
		return raw, line, nil
	}
	n := 0
	for {
		if err := rd.ctx.Err(); err != nil {
			return err
		}
		tok, err := peekDelim(dec)
		if err == io.EOF {
			break
		}
		if err != nil {
			return rd.jsonStreamErr(s, cr, dec, base, err)
		}
		n++
		if tok == '[' {
			at, _ := errorAt(cr, dec, base, nil) // the line of the '['
			if _, err := dec.Token(); err != nil {
				return rd.jsonStreamErr(s, cr, dec, base, err)
			}
			if !dec.More() {
				// Like an empty file: no resource, no Bundle, and an
				// input that must not import nothing silently.
				if err := rd.problem(newError(where(s, at), "", ErrFormat, "an empty JSON array: no resource or Bundle")); err != nil {
					return err
				}
			}
			for dec.More() {
				raw, line, err := decodeOne(false)
				if err != nil {
					return err
				}
				if err := rd.problem(rd.unit(s, line, raw, true)); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return rd.jsonStreamErr(s, cr, dec, base, err)
			}
			continue
		}
		raw, line, err := decodeOne(true)
		if err != nil {
			return err
		}
		if err := rd.problem(rd.unit(s, line, raw, true)); err != nil {
			return err
		}
	}
	if n == 0 {
		return newError(where(s, 1), "", ErrFormat, "empty file")
	}
	return nil
}

// releaseAfter is the size of a top-level JSON value from which readJSON
// releases its decoder's buffer once the value is decoded (a variable: the
// tests release after every value, to read every input both ways).
var releaseAfter = 1 << 20

// release returns a decoder that reads on where dec, which began at base
// of the stream cr counts, stopped: first the bytes dec read ahead (copied
// out of its buffer, which is left to the garbage collector with dec),
// then the rest of cr's reader; with its countReader, counting as cr
// counted, and the offset at which it begins. The bytes read ahead are
// uncounted from cr's lines, and counted again as the new decoder reads
// them, so that lines and offsets (lineOf, errorAt) and the MaxLine bound
// of the next value read on as they would with dec.
func release(dec *json.Decoder, cr *countReader, base int64) (*json.Decoder, *countReader, int64) {
	ahead, _ := io.ReadAll(dec.Buffered()) // a copy: never fails
	at := base + dec.InputOffset()
	next := &countReader{
		r:   io.MultiReader(bytes.NewReader(ahead), cr.r),
		off: at, mark: at,
		lines: cr.lines - int64(bytes.Count(ahead, []byte{'\n'})),
		max:   cr.max,
	}
	return json.NewDecoder(next), next, at
}

// peekDelim reports the first byte of the next value without consuming it
// ('[' for an array; anything else is decoded as one value).
func peekDelim(dec *json.Decoder) (byte, error) {
	if !dec.More() {
		// More is false at EOF and before a closing delimiter.
		if _, err := dec.Token(); err != nil {
			return 0, err
		}
		return 0, errors.New("unexpected closing delimiter")
	}
	rest, _ := io.ReadAll(io.LimitReader(dec.Buffered(), 64))
	b := bytes.TrimLeft(rest, " \t\r\n")
	if len(b) == 0 {
		return '{', nil
	}
	return b[0], nil
}

// jsonStreamErr classifies an error of the JSON file decoder, at the line
// of the byte it concerns (see errorAt).
func (rd *reader) jsonStreamErr(s *source, cr *countReader, dec *json.Decoder, base int64, err error) error {
	line, off := errorAt(cr, dec, base, err)
	var se *json.SyntaxError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) && !s.gz:
		return newError(where(s, line), "", ErrTruncated, "the file ends inside a JSON value")
	case errors.As(err, &se) && tooDeep(se):
		return newError(where(s, line), "", ErrJSON, "nested deeper than %d levels at byte offset %d (no FHIR resource is)", maxJSONDepth, off)
	case errors.As(err, &se):
		return newError(where(s, line), "", ErrJSON, "invalid JSON at byte offset %d", off)
	case errors.Is(err, io.ErrUnexpectedEOF) && s.gz:
		return newError(where(s, line), "", ErrTruncated, "the file (or its gzip stream) ends inside a JSON value")
	}
	return rd.streamErr(s, line, err)
}

// errorAt returns the line and the byte offset of the byte a decoder error
// concerns, dec having begun at base of the stream (the offset in the JSON text: after a byte order mark, in the
// decompressed stream of a .gz file). The decoder reads ahead of its
// position (dec.InputOffset()), and a SyntaxError's Offset counts only the
// bytes its values scanned (not those Token consumed), so neither cr.lines
// nor Offset tells the line.
// What the decoder holds from its position on (dec.Buffered(), every byte
// read and not consumed) does: the lines before the position are
// cr.lines less the newlines buffered, and the byte is found in the
// buffer:
//   - a syntax error: where a fresh decoder of the buffer fails (a value
//     Decode rejected), or else at the position (Token rejected the byte
//     there: "expected comma after array element");
//   - the input ending inside a value: its last non-blank byte;
//   - anything else (a read error, a value over MaxLine): the start of the
//     value at the position.
func errorAt(cr *countReader, dec *json.Decoder, base int64, err error) (line int, off int64) {
	var buf bytes.Buffer
	_, _ = io.Copy(&buf, dec.Buffered()) // a *bytes.Reader: never fails
	b := buf.Bytes()
	pos := len(b) - len(bytes.TrimLeft(b, " \t\r\n"))
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		var raw json.RawMessage
		if err := json.NewDecoder(bytes.NewReader(b)).Decode(&raw); errors.As(err, &se) && se.Offset > 0 {
			pos = int(se.Offset) - 1 // Offset counts the bad byte
		}
	case errors.Is(err, io.ErrUnexpectedEOF):
		pos = len(bytes.TrimRight(b, " \t\r\n")) - 1
	}
	pos = max(0, min(pos, len(b)))
	line = int(cr.lines) - bytes.Count(b, []byte{'\n'}) + bytes.Count(b[:pos], []byte{'\n'}) + 1
	return line, base + dec.InputOffset() + int64(pos)
}

// newlineCounter counts the newlines written to it.
type newlineCounter int

func (n *newlineCounter) Write(p []byte) (int, error) {
	*n += newlineCounter(bytes.Count(p, []byte{'\n'}))
	return len(p), nil
}

// errReader remembers the first error of its reader.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && e.err == nil {
		e.err = err
	}
	return n, err
}
