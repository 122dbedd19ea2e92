package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// ManifestName is the manifest file Import looks for when given a directory.
const ManifestName = "manifest.jsonl"

// ImportReport summarizes a successful Import.
type ImportReport struct {
	Lines     int   `json:"lines"`     // manifest entries (non-blank lines)
	Created   int   `json:"created"`   // URIs not in the store before
	Updated   int   `json:"updated"`   // URIs whose content or metadata changed (new version)
	Unchanged int   `json:"unchanged"` // URIs identical to their current version
	Retired   int   `json:"retired"`   // URIs retired (ImportEntries: deleted, moved, no longer carried, or missing from a full import)
	Repeated  int   `json:"repeated"`  // ImportEntries: entries repeating an earlier entry of the same input exactly, imported once
	Bytes     int64 `json:"bytes"`     // total size of the content of all entries

	// Relabelled counts the live items ImportEntries gave a new version
	// only to change their labels: to set or clear the consent label
	// "opt-out" or the patient-wide "vip", because their patient's opt-out
	// or VIP standing changed (docs/import.md, "Patient-wide labels"), to
	// add to a Binary the stream links but does not hold
	// (Entry.Stored) a label of the resources linking it, or to add to a
	// live Binary, or a live resource linking or mentioning one, a label
	// of another member of the Binary's component (the link index,
	// links.go).
	Relabelled int `json:"relabelled"`

	// Deleted counts ImportEntries' Deleted entries that retired a live
	// resource (in Retired too); DeletedAbsent those that named none:
	// never imported (or of another tenant), or retired already (in
	// Unchanged too). A FHIR sync reports the first as its deletions and
	// the second apart: deletions the server listed of resources the
	// catalog never held.
	Deleted       int `json:"deleted,omitempty"`
	DeletedAbsent int `json:"deleted_absent,omitempty"`
}

// Import reads a manifest and the files it names and writes them to the store
// in one transaction: either every entry is imported or nothing is.
//
// path is a manifest file or a directory holding ManifestName. Every line and
// every file is validated before anything is written; problems are reported
// as *ManifestError values (wrapping ErrBadManifest) naming the line, for all
// lines up to a cap. Files are opened through an os.Root at the manifest's
// directory, so neither ".." nor a symlink can reach outside it.
//
// Content is stored once per digest. A URI whose content or metadata differs
// from its current version gets Version+1 (and a new Digest if the content
// changed); the previous versions stay in the history. Identical entries are
// counted as Unchanged and not rewritten.
//
// In an encrypted catalog every new blob is sealed under its own fresh data
// key (Options.DataKeys.NewDataKey, up to 8 calls in flight) before the write
// transaction begins; a provider failure returns a *KeyError and nothing is
// written. On a plaintext catalog opened with Migrate, Import returns
// ErrPlaintext.
//
// progress, if not nil, is called from the calling goroutine with done
// growing monotonically to total. total is twice the number of entries (three
// times in an encrypted catalog): one step when an entry's file has been
// validated, one when its blob has been sealed (or found stored) and one when
// it has been written. A canceled ctx aborts the import before commit.
func (s *Store) Import(ctx context.Context, path string, progress func(done, total int)) (ImportReport, error) {
	if s.readOnly {
		return ImportReport{}, errors.New("store: import into a read-only store")
	}
	manifestPath, dir, err := resolveManifest(path)
	if err != nil {
		return ImportReport{}, err
	}
	mf, err := os.Open(manifestPath)
	if err != nil {
		return ImportReport{}, fmt.Errorf("store: open manifest: %w", pathless(err))
	}
	lines, err := parseManifest(mf, filepath.Base(manifestPath))
	mf.Close()
	if err != nil {
		return ImportReport{}, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return ImportReport{}, fmt.Errorf("store: open manifest directory: %w", pathless(err))
	}
	defer root.Close()

	// The mode is read once here and checked again in the write transaction:
	// the content is sealed (or not) for the mode it is committed under.
	var mode string
	err = s.view(func(tx *bolt.Tx) error {
		mode, _, err = encryption(tx)
		return err
	})
	if err != nil {
		return ImportReport{}, err
	}
	if err := s.checkMode(mode); err != nil {
		return ImportReport{}, err
	}
	steps := 2
	if mode == EncryptionEnvelope {
		steps = 3
	}
	prog := newProgress(progress, steps*len(lines))
	start := time.Now()
	s.log.Info("import validating", "entries", len(lines))

	// Phase 1: read, check and hash every file, in parallel. The content is
	// kept: bbolt references (does not copy) values until commit, so holding
	// it here costs no extra peak memory, and what was validated is exactly
	// what is written.
	contents, digests, err := validateFiles(ctx, root, filepath.Base(manifestPath), lines, prog)
	if err != nil {
		return ImportReport{}, err
	}
	sizes := make([]int64, len(contents))
	for i, c := range contents {
		sizes[i] = int64(len(c))
	}
	s.log.Info("import validated", "entries", len(lines), "elapsed", time.Since(start).Round(time.Millisecond))
	start = time.Now()

	// Phase 2 (encrypted catalogs): seal every new blob under a fresh data
	// key, outside the write transaction, because each data key is a round
	// trip to the provider and the write lock must not wait for the network.
	blobValue := func(i int) []byte { return contents[i] }
	if mode == EncryptionEnvelope {
		sealed, err := s.sealNew(ctx, contents, digests, prog, len(lines))
		if err != nil {
			s.log.Warn("import failed; nothing written", "err", err)
			return ImportReport{}, err
		}
		clear(contents) // the plaintext is no longer needed
		blobValue = func(i int) []byte { return sealed[digests[i]] }
		s.log.Info("import sealed", "blobs", len(sealed), "elapsed", time.Since(start).Round(time.Millisecond))
		start = time.Now()
	}

	// Phase 3: one write transaction.
	var rep ImportReport
	err = s.update(func(tx *bolt.Tx) error {
		m, _, err := encryption(tx)
		if err != nil {
			return err
		}
		if m != mode {
			return errors.New("store: encryption mode changed during import; import again")
		}
		rep, err = writeEntries(ctx, tx, lines, blobValue, digests, sizes, prog)
		if err != nil {
			return err
		}
		s.log.Info("import committing", "elapsed", time.Since(start).Round(time.Millisecond))
		return nil
	})
	if err != nil {
		s.log.Warn("import failed; nothing written", "err", err)
		return ImportReport{}, err
	}
	prog.finish()
	s.log.Info("import committed", "elapsed", time.Since(start).Round(time.Millisecond), "lines", rep.Lines, "created", rep.Created,
		"updated", rep.Updated, "unchanged", rep.Unchanged, "bytes", rep.Bytes)
	return rep, nil
}

// checkMode returns the error for reading or writing blobs of a catalog
// recorded in mode with this Store's options: ErrPlaintext on a plaintext
// catalog opened with DataKeys (Migrate) before Reencrypt.
func (s *Store) checkMode(mode string) error {
	switch {
	case mode == EncryptionEnvelope && s.keys == nil:
		return ErrEncrypted // unreachable: Open refused
	case mode == EncryptionNone && s.keys != nil:
		return ErrPlaintext
	}
	return nil
}

// newBlobWorkers bounds the concurrent NewDataKey (and Reencrypt's unwrap
// and rewrap) calls: each is a network round trip to the provider.
const newBlobWorkers = 8

// sealNew seals, for every distinct digest not stored yet, the content under
// a fresh data key, and returns the envelopes by digest. Progress advances
// by one per entry from base. The first provider failure cancels the rest
// and is returned as a *KeyError.
func (s *Store) sealNew(ctx context.Context, contents [][]byte, digests [][sha256.Size]byte, prog *progress, base int) (map[[sha256.Size]byte][]byte, error) {
	var need []int // first entry of each distinct missing digest
	seen := make(map[[sha256.Size]byte]bool, len(digests))
	err := s.view(func(tx *bolt.Tx) error {
		blobs := tx.Bucket(bucketBlobs)
		for i, d := range digests {
			if !seen[d] {
				seen[d] = true
				if blobs.Get(d[:]) == nil {
					need = append(need, i)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	skipped := len(digests) - len(need) // stored already or duplicates
	prog.set(base + skipped)
	sealed := make([][]byte, len(need))
	err = runWorkers(ctx, len(need), newBlobWorkers, func(ctx context.Context, j int) error {
		i := need[j]
		key, wrapped, err := s.keys.NewDataKey(ctx)
		if err == nil {
			sealed[j], err = sealBlobRandom(key, wrapped, digests[i][:], contents[i])
		}
		if err != nil {
			return &KeyError{Op: "new", Digest: formatDigest(digests[i]), Err: err}
		}
		return nil
	}, func(done int) { prog.set(base + skipped + done) })
	if err != nil {
		return nil, err
	}
	out := make(map[[sha256.Size]byte][]byte, len(need))
	for j, i := range need {
		out[digests[i]] = sealed[j]
	}
	return out, nil
}

// runWorkers calls work(ctx, j) for every j in [0, n) on up to workers
// goroutines, and report(done) from the calling goroutine about every
// 100 ms and once at the end. The first error cancels the remaining work and
// is returned; a canceled ctx returns ctx.Err().
func runWorkers(ctx context.Context, n, workers int, work func(context.Context, int) error, report func(done int)) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next, done atomic.Int64
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for {
				j := int(next.Add(1) - 1)
				if j >= n || wctx.Err() != nil {
					return
				}
				if err := work(wctx, j); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					cancel()
					return
				}
				done.Add(1)
			}
		})
	}
	waitReporting(&wg, func() { report(int(done.Load())) })
	if err := ctx.Err(); err != nil {
		return err
	}
	return first
}

// importFillPercent is the bucket fill factor during import: keys are
// written in ascending order, so pages can be packed fuller than bbolt's
// default of one half.
const importFillPercent = 0.9

// writeEntries writes validated entries in tx. bbolt splits nodes only at
// commit, so one transaction inserting many keys in random order costs
// O(n²) memmove; blobs are therefore written in digest order and resources
// and versions in URI order, which makes every insert an append.
//
// blobValue(i) is the value to store for entry i's digest if no blob has it
// yet (the content, or its envelope); sizes[i] is the content's length.
func writeEntries(ctx context.Context, tx *bolt.Tx, lines []manifestLine, blobValue func(i int) []byte, digests [][sha256.Size]byte, sizes []int64, prog *progress) (ImportReport, error) {
	rep := ImportReport{Lines: len(lines)}
	res := tx.Bucket(bucketResources)
	vers := tx.Bucket(bucketVersions)
	blobs := tx.Bucket(bucketBlobs)
	for _, b := range []*bolt.Bucket{res, vers, blobs} {
		b.FillPercent = importFillPercent
	}

	byDigest := make([]int, len(lines))
	for i := range byDigest {
		byDigest[i] = i
		rep.Bytes += sizes[i]
	}
	slices.SortFunc(byDigest, func(a, b int) int { return bytes.Compare(digests[a][:], digests[b][:]) })
	for n, i := range byDigest {
		if n%1024 == 0 && ctx.Err() != nil {
			return ImportReport{}, ctx.Err()
		}
		if n > 0 && digests[byDigest[n-1]] == digests[i] {
			continue // deduplicated within this manifest
		}
		if blobs.Get(digests[i][:]) != nil {
			continue // already stored
		}
		v := blobValue(i)
		if v == nil {
			// Only possible if a blob seen at sealing time vanished; blobs
			// are never deleted.
			return ImportReport{}, fmt.Errorf("%w: blob %s disappeared during import", ErrCorrupt, formatDigest(digests[i]))
		}
		if err := blobs.Put(digests[i][:], v); err != nil {
			return ImportReport{}, fmt.Errorf("store: put blob: %w", err)
		}
	}

	byURI := byDigest // reuse
	for i := range byURI {
		byURI[i] = i
	}
	slices.SortFunc(byURI, func(a, b int) int { return strings.Compare(lines[a].entry.URI, lines[b].entry.URI) })
	for n, i := range byURI {
		if n%1024 == 0 && ctx.Err() != nil {
			return ImportReport{}, ctx.Err()
		}
		e := &lines[i].entry
		r := Resource{
			URI:         e.URI,
			Name:        e.Name,
			Title:       e.Title,
			Description: e.Description,
			MIMEType:    e.MIMEType,
			Size:        sizes[i],
			Annotations: e.Annotations,
			Digest:      formatDigest(digests[i]),
			Version:     1,
			Labels:      e.Labels,
		}
		key := []byte(r.URI)
		if old := res.Get(key); old != nil {
			var prev Resource
			if err := decodeResource(old, &prev); err != nil {
				return ImportReport{}, err
			}
			r.Version = prev.Version
			same, err := sameResource(r, prev)
			if err != nil {
				return ImportReport{}, err
			}
			if same {
				rep.Unchanged++
				prog.step()
				continue
			}
			r.Version = prev.Version + 1
			rep.Updated++
		} else {
			rep.Created++
		}
		if err := putLive(res, vers, r); err != nil {
			return ImportReport{}, err
		}
		prog.step()
	}
	return rep, ctx.Err()
}

// resolveManifest returns the manifest file and the directory files are
// relative to.
func resolveManifest(path string) (manifest, dir string, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", "", fmt.Errorf("store: manifest: %w", pathless(err))
	}
	if fi.IsDir() {
		return filepath.Join(path, ManifestName), path, nil
	}
	return path, filepath.Dir(path), nil
}

// pathless strips the path from a *fs.PathError: paths are operator input
// and may name a patient.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// sameResource reports whether a and b encode identically (Version included).
func sameResource(a, b Resource) (bool, error) {
	ea, err := json.Marshal(a)
	if err != nil {
		return false, fmt.Errorf("store: encode resource: %w", err)
	}
	eb, err := json.Marshal(b)
	if err != nil {
		return false, fmt.Errorf("store: encode resource: %w", err)
	}
	return bytes.Equal(ea, eb), nil
}

// fileError is a problem with a referenced file, phrased without content.
type fileError struct{ reason string }

func (e *fileError) Error() string { return e.reason }

func fileProblem(manifest string, line int, err error) *ManifestError {
	var fe *fileError
	reason := "cannot be read"
	switch {
	case errors.As(err, &fe):
		reason = fe.reason
	case errors.Is(err, fs.ErrNotExist):
		reason = "does not exist"
	case errors.Is(err, fs.ErrPermission):
		reason = "permission denied"
	case strings.Contains(err.Error(), "escapes from parent") || strings.Contains(err.Error(), "path escapes"):
		reason = "path escapes the manifest directory"
	}
	return &ManifestError{File: manifest, Line: line, Field: "file", Reason: reason}
}

// readFile reads a regular file of at most MaxBlobSize bytes through root.
// The file is opened non-blocking (where supported) so that a FIFO cannot
// stall the import, then checked with fstat.
func readFile(root *os.Root, name string) ([]byte, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &fileError{"is not a regular file"}
	}
	if fi.Size() > MaxBlobSize {
		return nil, &fileError{fmt.Sprintf("larger than %d bytes", MaxBlobSize)}
	}
	// Size+1 so that reaching EOF needs no reallocation; the file may still
	// grow while it is read, hence the limit.
	buf := make([]byte, 0, fi.Size()+1)
	for {
		if len(buf) == cap(buf) {
			if len(buf) > MaxBlobSize {
				return nil, &fileError{fmt.Sprintf("larger than %d bytes", MaxBlobSize)}
			}
			buf = slices.Grow(buf, 4096)
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if len(buf) > MaxBlobSize {
		return nil, &fileError{fmt.Sprintf("larger than %d bytes", MaxBlobSize)}
	}
	return buf, nil
}

var pngSignature = []byte("\x89PNG\r\n\x1a\n")

// checkContent verifies that data is plausible content for u's family (an
// attachment: for its media type mimeType). Its reasons never quote the
// content.
func checkContent(u URI, mimeType string, data []byte) error {
	switch u.Scheme {
	case SchemeAttachment:
		if _, reason := checkAttachment(mimeType, data); reason != "" {
			return &fileError{reason}
		}
	case SchemeFHIR:
		// encoding/json would replace invalid UTF-8 silently; minimization
		// rejects it, so such a resource could be listed but never read.
		if !utf8.Valid(data) {
			return &fileError{"is not valid utf-8"}
		}
		var head struct {
			ResourceType string `json:"resourceType"`
		}
		if err := json.Unmarshal(data, &head); err != nil {
			var se *json.SyntaxError
			if errors.As(err, &se) {
				return &fileError{fmt.Sprintf("is not valid json (byte %d)", se.Offset)}
			}
			return &fileError{"is not a json object"}
		}
		if head.ResourceType == "" {
			return &fileError{"has no resourceType"}
		}
		if !strings.EqualFold(head.ResourceType, u.Type) {
			return &fileError{"resourceType does not match type " + u.Type}
		}
	case SchemeNote:
		if !utf8.Valid(data) {
			return &fileError{"is not valid utf-8"}
		}
	case SchemeReport:
		if !bytes.HasPrefix(data, []byte("%PDF-")) {
			return &fileError{"is not a pdf (no %PDF- header)"}
		}
	case SchemeImage:
		if !bytes.HasPrefix(data, pngSignature) {
			return &fileError{"is not a png (bad signature)"}
		}
	default:
		return &fileError{"unknown family"}
	}
	return nil
}

// validateFiles reads, checks and hashes every entry's file with one worker
// per CPU and returns the contents and digests in manifest order. It reports every failing
// line up to the cap.
func validateFiles(ctx context.Context, root *os.Root, manifest string, lines []manifestLine, prog *progress) ([][]byte, [][sha256.Size]byte, error) {
	contents := make([][]byte, len(lines))
	digests := make([][sha256.Size]byte, len(lines))
	failed := make([]error, len(lines))
	workers := min(runtime.GOMAXPROCS(0), 8)
	var next atomic.Int64
	var done atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(lines) || ctx.Err() != nil {
					return
				}
				data, err := readFile(root, lines[i].entry.File)
				if err == nil {
					err = checkContent(lines[i].uri, lines[i].entry.MIMEType, data)
				}
				if err != nil {
					failed[i] = err
				} else {
					contents[i] = data
					digests[i] = sha256.Sum256(data)
				}
				done.Add(1)
			}
		}()
	}
	// Report progress from this goroutine only.
	waitReporting(&wg, func() { prog.set(int(done.Load())) })
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	probs := &problems{file: manifest}
	for i, err := range failed {
		if err != nil {
			p := fileProblem(manifest, lines[i].line, err)
			probs.add(p.Line, p.Field, p.Reason)
		}
	}
	if err := probs.err(); err != nil {
		return nil, nil, err
	}
	return contents, digests, nil
}

// progress throttles calls to the caller's progress callback to about one
// per 0.1% of total; done only grows and the last call has done == total.
type progress struct {
	fn          func(done, total int)
	total, done int
	last        int
	every       int
}

func newProgress(fn func(done, total int), total int) *progress {
	return &progress{fn: fn, total: total, every: max(1, total/1000)}
}

func (p *progress) set(done int) {
	p.done = max(p.done, done)
	if p.fn == nil || p.done == p.last {
		return
	}
	if p.done-p.last >= p.every || p.done == p.total {
		p.last = p.done
		p.fn(p.done, p.total)
	}
}

func (p *progress) step() { p.set(p.done + 1) }

func (p *progress) finish() { p.set(p.total) }

func newTicker() *time.Ticker { return time.NewTicker(100 * time.Millisecond) }

// waitReporting waits for wg, calling report from this goroutine every
// tick and once more at the end, so that progress callbacks never run
// concurrently.
func waitReporting(wg *sync.WaitGroup, report func()) {
	waitCh := make(chan struct{})
	go func() { wg.Wait(); close(waitCh) }()
	ticker := newTicker()
	defer ticker.Stop()
	for running := true; running; {
		select {
		case <-waitCh:
			running = false
		case <-ticker.C:
		}
		report()
	}
}
