package app

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custos-mcp/custos/store"
	"github.com/custos-mcp/custos/store/storetest"
	"github.com/custos-mcp/custos/store/synth"
)

// readAheadStep is one import of a readAheadScenario: the files of a
// directory (name -> content), or the path of an input made elsewhere.
type readAheadStep struct {
	files map[string]string
	path  string
	full  bool
}

// rahObs is Observation id of patient p, with text.
func rahObs(id, text string) string {
	return `{"resourceType":"Observation","id":"` + id + `","status":"final","code":{"text":"` + text + `"},"subject":{"reference":"Patient/p"}}`
}

// rahObservations are the NDJSON lines of Observations o<from>..o<to-1>.
func rahObservations(from, to int, text string) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		b.WriteString(rahObs(fmt.Sprintf("o%d", i), text) + "\n")
	}
	return b.String()
}

// readAheadScenarios are the inputs TestReadAheadImportsAlike imports
// both ways, each a sequence of imports into one catalog; every step
// holds more entries than a default batch, so that batches end between
// an entry and what the reader asks the catalog about it.
func readAheadScenarios(t *testing.T) map[string][]readAheadStep {
	ctxDoc := `{"resourceType":"DocumentReference","id":"dh","meta":{"security":[` + lnkHIV + `]},"status":"current","subject":{"reference":"Patient/p"},"content":[{"attachment":{"contentType":"text/plain","url":"https://elsewhere.example/doc/1"}}]}`
	// A Binary whose securityContext names a DocumentReference (not a
	// Patient) of an earlier import, and a resource linking it.
	ctxBin := `{"resourceType":"Binary","id":"bc","securityContext":{"reference":"DocumentReference/dh"},"contentType":"text/plain","data":"aGk="}`
	ctxRep := `{"resourceType":"DiagnosticReport","id":"r1","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/p"},"presentedForm":[{"contentType":"text/plain","url":"Binary/bc"}]}`
	deletion := `{"resourceType":"Bundle","type":"transaction","entry":[{"request":{"method":"DELETE","url":"Observation/o5"}},{"request":{"method":"DELETE","url":"Binary/bq"}}]}`
	reads := `{"resourceType":"Bundle","type":"batch","entry":[{"request":{"method":"GET","url":"Patient/p"}},{"request":{"method":"GET","url":"Observation/o1"}}]}`
	bulk := t.TempDir()
	if _, err := synth.Generate(context.Background(), bulk, synth.Options{Patients: 12, Seed: 7, Tenant: "t"}); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(bulk, "bulk-export.json")
	return map[string][]readAheadStep{
		"ndjson-and-bundles": {
			{full: true, files: map[string]string{
				"Patient.ndjson":           lnkPat + "\n" + lnkQ + "\n",
				"Binary.ndjson":            lnkBin + "\n" + lnkBinQ + "\n",
				"DocumentReference.ndjson": lnkDoc("d1", "bx", "a", lnkPSY) + "\n" + ctxDoc + "\n",
				"Observation.ndjson":       rahObservations(0, 250, "x"),
			}},
			// A Binary of the earlier import that a resource links
			// (StoredBinary), a Binary naming a DocumentReference
			// (PlaceContext), deletions, reads skipped, conditional
			// creates and updates.
			{files: map[string]string{
				"DocumentReference.ndjson": lnkDoc("d3", "bx", "b", lnkHIV) + "\n",
				"Binary.ndjson":            ctxBin + "\n",
				"DiagnosticReport.ndjson":  ctxRep + "\n",
				"Observation.ndjson":       rahObservations(250, 400, "y"),
				"delete.json":              deletion,
				"reads.json":               reads,
				"cond.json":                condBundle("11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222", "33333333-3333-4333-8333-333333333333"),
			}},
			// Conditional entries whose matches an earlier import and an
			// earlier Bundle of this one wrote; updates across batches.
			{files: map[string]string{
				"a.json":             condBundle("44444444-4444-4444-8444-444444444444", "55555555-5555-4555-8555-555555555555", "66666666-6666-4666-8666-666666666666"),
				"b.json":             condBundle("77777777-7777-4777-8777-777777777777", "88888888-8888-4888-8888-888888888888", "99999999-9999-4999-8999-999999999999"),
				"Observation.ndjson": rahObservations(0, 150, "z"),
			}},
			// A read error after many entries: refused alike.
			{files: map[string]string{"Observation.ndjson": rahObservations(0, 200, "w") + "{not json\n"}},
			// A full import: what it lacks is retired.
			{full: true, files: map[string]string{
				"Patient.ndjson":     lnkPat + "\n",
				"Observation.ndjson": rahObservations(100, 300, "z"),
			}},
		},
		"bulk-export": {{path: manifest}, {path: manifest}, {path: manifest, full: true}},
	}
}

// catalogDump is every key and value of every bucket of the catalog at
// path; of an encrypted catalog's blobs only the keys (the digests of the
// content: the sealed values hold random data keys and nonces).
func catalogDump(t *testing.T, path string, sealed bool) map[string]string {
	t.Helper()
	return storetest.Dump(t, path, func(name, _, v []byte) ([]byte, bool) {
		if sealed && string(name) == "blobs" {
			return nil, true
		}
		return v, true
	})
}

// TestReadAheadImportsAlike imports every scenario both ways, read ahead
// (the consumer slowed, so that the reader runs a batch ahead) and in
// the serial reference path (readAheadOn off), in batches of one and of
// the default, plaintext and encrypted: after each import the reports
// (Skipped too) and errors are equal, and every bucket of the two
// catalogs is equal key for key, the transaction ids the catalog records
// included.
func TestReadAheadImportsAlike(t *testing.T) {
	scenarios := readAheadScenarios(t)
	key := newLinkFixture(t).key
	defer func(on bool) { readAheadOn, slowConsumer, tuneEntries = on, nil, nil }(readAheadOn)
	for _, name := range slices.Sorted(maps.Keys(scenarios)) {
		for _, batch := range []int{1, store.DefaultBatchEntries} {
			for _, encrypted := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/batch=%d,encrypted=%v", name, batch, encrypted), func(t *testing.T) {
					var dk store.DataKeys
					if encrypted {
						dk = gcmKeys{kek: make([]byte, 32)}
					}
					tuneEntries = func(eo *store.EntryOptions) {
						eo.BatchEntries = batch
						eo.Now = func() time.Time { return time.Unix(1e9, 0) }
					}
					ahead, serial := filepath.Join(t.TempDir(), "catalog.db"), filepath.Join(t.TempDir(), "catalog.db")
					queued := 0
					for i, step := range scenarios[name] {
						path := step.path
						if path == "" {
							path = t.TempDir()
							for f, content := range step.files {
								if err := os.WriteFile(filepath.Join(path, f), []byte(content), 0o644); err != nil {
									t.Fatal(err)
								}
							}
						}
						imp := func(cat string, on bool) (string, error) {
							readAheadOn, slowConsumer = on, nil
							if on {
								slowConsumer = func(n int) {
									queued = max(queued, n)
									time.Sleep(20 * time.Microsecond)
								}
							}
							rep, err := ImportFHIR(context.Background(), cat, path, FHIRImport{Tenant: "t", IDKey: key, Full: step.full, DataKeys: dk})
							return fmt.Sprintf("%+v", rep), err
						}
						aheadRep, aheadErr := imp(ahead, true)
						serialRep, serialErr := imp(serial, false)
						if aheadRep != serialRep || fmt.Sprint(aheadErr) != fmt.Sprint(serialErr) {
							t.Errorf("import %d: read ahead %s %v, serial %s %v", i, aheadRep, aheadErr, serialRep, serialErr)
						}
						a, s := catalogDump(t, ahead, encrypted), catalogDump(t, serial, encrypted)
						for _, k := range slices.Sorted(maps.Keys(s)) {
							if a[k] != s[k] {
								t.Errorf("import %d: %s: read ahead %q, serial %q", i, k, a[k], s[k])
							}
						}
						if len(a) != len(s) {
							t.Errorf("import %d: %d keys read ahead, %d serial", i, len(a), len(s))
						}
					}
					if queued < min(batch, 2) {
						t.Errorf("the reader was at most %d entries ahead of the slowed consumer: the test does not run it ahead", queued)
					}
				})
			}
		}
	}
}

// barrierEntries is a stream of Patients p0..p<n-1> that, before it
// yields each, asks cat whether each Patient yielded before it is in the
// catalog (by keyed id, as placeResource asks), and notes the answers.
func barrierEntries(t *testing.T, cat catalog, namer *store.Namer, n int, answers *[]string) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		for i := range n {
			var found []string
			for j := range i {
				u, err := namer.URI("Patient", fmt.Sprintf("p%d", j), "")
				if err != nil {
					t.Error(err)
					return
				}
				switch _, err := cat.GetByID(u.ID); {
				case err == nil:
					found = append(found, fmt.Sprintf("p%d", j))
				case !errors.Is(err, store.ErrNotFound):
					yield(store.Entry{}, err)
					return
				}
			}
			*answers = append(*answers, strings.Join(found, ","))
			id := fmt.Sprintf("p%d", i)
			e := store.Entry{Type: "Patient", ID: id, Patient: id, Body: []byte(`{"resourceType":"Patient","id":"` + id + `"}`),
				MIMEType: "application/fhir+json", Where: "Patient.ndjson:" + id}
			if !yield(e, nil) {
				return
			}
		}
	}
}

// TestReadAheadBarrier: what the reader reads of the catalog, read ahead
// of a slowed consumer, is what it reads in the serial path, entry for
// entry: before each read every entry yielded before it was taken and
// every batch it ended committed (readAhead.settle). Without the
// barrier the reader, ahead, finds fewer of the Patients it yielded.
func TestReadAheadBarrier(t *testing.T) {
	key := newLinkFixture(t).key
	namer, err := store.NewNamer("t", key.Bytes, key.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { slowConsumer = nil }()
	run := func(ahead bool) []string {
		var answers []string
		eo := store.EntryOptions{Namer: namer, BatchEntries: 3}
		slowConsumer = func(int) { time.Sleep(200 * time.Microsecond) }
		_, err := store.ImportEntriesStagedFrom(context.Background(), filepath.Join(t.TempDir(), "catalog.db"), func(st *store.Store) iter.Seq2[store.Entry, error] {
			if !ahead {
				return barrierEntries(t, settledCatalog{st, nil}, namer, 20, &answers)
			}
			ra := newReadAhead(eo)
			return ra.run(barrierEntries(t, settledCatalog{st, ra}, namer, 20, &answers))
		}, eo, store.Options{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return answers
	}
	serial, ahead := run(false), run(true)
	if !slices.Equal(serial, ahead) {
		t.Errorf("what the reader found before each entry:\nread ahead %q\nserial     %q", ahead, serial)
	}
	if len(serial) != 20 || serial[3] != "p0,p1,p2" || serial[5] != "p0,p1,p2" {
		t.Errorf("serial answers %q: want the batches of three committed before the next entry is asked for", serial)
	}
}

// readerGoroutines counts the goroutines running a read-ahead's reader,
// polling for up to a second until there is none: a joined reader has
// closed its finished channel, its last act, but may not have exited
// yet (goleak polls the same way). That the join happens before the
// stream returns, TestReadAheadConsumerStopJoinsReader checks on its
// own.
func readerGoroutines() int {
	deadline := time.Now().Add(time.Second)
	for {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		for n == len(buf) {
			buf = make([]byte, 2*len(buf))
			n = runtime.Stack(buf, true)
		}
		count := strings.Count(string(buf[:n]), "(*readAhead).read(")
		if count == 0 || time.Now().After(deadline) {
			return count
		}
		time.Sleep(time.Millisecond)
	}
}

// endless is a stream of Observations without end, counting what it
// yielded; told to stop, it takes its time to return (as a reader
// closing its files), then sets returned.
func endless(yielded *int, returned *bool) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		for i := 0; ; i++ {
			*yielded = i
			if !yield(store.Entry{Type: "Observation", ID: fmt.Sprint(i), Body: []byte("{}")}, nil) {
				time.Sleep(20 * time.Millisecond)
				*returned = true
				return
			}
		}
	}
}

// A consumer that stops (an error, too many problems) stops the reader
// and joins it before the iteration returns: the reader returned, no
// reader goroutine is left, and it was at most a queue ahead.
func TestReadAheadConsumerStopJoinsReader(t *testing.T) {
	ra := newReadAhead(store.EntryOptions{BatchEntries: 8})
	yielded, took, returned := 0, 0, false
	for range ra.run(endless(&yielded, &returned)) {
		if took++; took == 5 {
			break
		}
	}
	if !returned {
		t.Error("the stream had not returned when the consumer's iteration did")
	}
	if n := readerGoroutines(); n != 0 {
		t.Errorf("%d reader goroutines left after the consumer stopped", n)
	}
	if yielded > 5+3*8 {
		t.Errorf("the reader yielded %d entries for a consumer that took 5 through a queue of 8 (the consumer's chunk, one queued, one filling)", yielded)
	}
}

// The same through ImportFHIR: an entry the catalog refuses (the
// resource is another source's) fails the import in its first batch,
// while the reader reads ahead; the error is the serial path's, and no
// reader goroutine is left.
func TestReadAheadConsumerErrorJoinsReader(t *testing.T) {
	f := newLinkFixture(t)
	if _, err := ImportFHIR(context.Background(), f.cat, f.dir(map[string][]string{"Patient": {lnkPat}}), FHIRImport{Tenant: f.tenant, IDKey: f.key, Source: "other"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Patient.ndjson"), []byte(lnkPat+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Observation.ndjson"), []byte(rahObservations(0, 500, "x")), 0o644); err != nil {
		t.Fatal(err)
	}
	defer func(on bool) { readAheadOn, slowConsumer = on, nil }(readAheadOn)
	errs := map[bool]string{}
	for _, on := range []bool{false, true} {
		readAheadOn = on
		slowConsumer = func(int) { time.Sleep(10 * time.Microsecond) }
		_, err := ImportFHIR(context.Background(), f.cat, dir, FHIRImport{Tenant: f.tenant, IDKey: f.key})
		if err == nil {
			t.Fatal("an import of another source's resource succeeded")
		}
		errs[on] = err.Error()
		if n := readerGoroutines(); n != 0 {
			t.Errorf("%d reader goroutines left after the import failed", n)
		}
	}
	if errs[true] != errs[false] {
		t.Errorf("read ahead %q, serial %q", errs[true], errs[false])
	}
}

// A cancelled import returns the context's error, changes nothing and
// leaves no reader goroutine.
func TestReadAheadCancelled(t *testing.T) {
	f := newLinkFixture(t)
	f.mustImp(true, map[string][]string{"Patient": {lnkPat}})
	before := f.catalogBytes()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Observation.ndjson"), []byte(rahObservations(0, 3000, "x")), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer func() { slowConsumer = nil }()
	took := 0
	slowConsumer = func(int) {
		if took++; took == 1500 {
			cancel()
		}
	}
	_, err := ImportFHIR(ctx, f.cat, dir, FHIRImport{Tenant: f.tenant, IDKey: f.key})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if n := readerGoroutines(); n != 0 {
		t.Errorf("%d reader goroutines left after the import was cancelled", n)
	}
	if !slices.Equal(before, f.catalogBytes()) {
		t.Error("the cancelled import changed the catalog")
	}
}

// panickingReader yields three Observations, then panics "reader bug".
func panickingReader(yield func(store.Entry, error) bool) {
	for i := range 3 {
		if !yield(store.Entry{Type: "Observation", ID: fmt.Sprint(i)}, nil) {
			return
		}
	}
	panic("reader bug")
}

// A panic of the reader reaches the consumer's goroutine after the
// entries yielded before it, as in the serial path, where whatever
// recovers it there (net/http, serving the admin socket's POST /v1/sync)
// recovers it; the reader's goroutine is gone. A reader that exits
// (runtime.Goexit) ends the stream with an error, never as if complete.
func TestReadAheadReaderPanic(t *testing.T) {
	consume := func(seq iter.Seq2[store.Entry, error]) (took int, p any) {
		defer func() { p = recover() }()
		for _, err := range seq {
			if err != nil {
				t.Errorf("stream error %v", err)
			}
			took++
		}
		return took, nil
	}
	serialTook, serialP := consume(panickingReader)
	took, p := consume(newReadAhead(store.EntryOptions{}).run(panickingReader))
	if took != serialTook || p != serialP || p != "reader bug" {
		t.Errorf("read ahead: %d entries then panic %v; serial: %d then %v", took, p, serialTook, serialP)
	}
	if n := readerGoroutines(); n != 0 {
		t.Errorf("%d reader goroutines left after the panic", n)
	}

	exiting := func(yield func(store.Entry, error) bool) {
		if yield(store.Entry{Type: "Observation", ID: "0"}, nil) {
			runtime.Goexit()
		}
	}
	var last error
	n := 0
	for _, err := range newReadAhead(store.EntryOptions{}).run(exiting) {
		n, last = n+1, err
	}
	if n != 2 || !errors.Is(last, errReaderExited) {
		t.Errorf("a reader that exits: %d elements, last error %v; want the entry and errReaderExited", n, last)
	}
}

// A stream error after entries reaches the consumer after them, as in
// the serial path, and ends the stream.
func TestReadAheadReaderError(t *testing.T) {
	bad := errors.New("reading FHIR input: a bad line")
	failing := func(yield func(store.Entry, error) bool) {
		for i := range 5 {
			if !yield(store.Entry{Type: "Observation", ID: fmt.Sprint(i)}, nil) {
				return
			}
		}
		yield(store.Entry{}, bad)
	}
	consume := func(seq iter.Seq2[store.Entry, error]) (got []string) {
		for e, err := range seq {
			if err != nil {
				return append(got, "error: "+err.Error())
			}
			got = append(got, e.ID)
		}
		return got
	}
	serial, ahead := consume(failing), consume(newReadAhead(store.EntryOptions{BatchEntries: 2}).run(failing))
	if !slices.Equal(serial, ahead) || len(serial) != 6 {
		t.Errorf("read ahead %q, serial %q", ahead, serial)
	}
	if n := readerGoroutines(); n != 0 {
		t.Errorf("%d reader goroutines left", n)
	}
}

// The reader is at most about a quarter of a batch of content bytes
// ahead of the consumer (BatchBytes / aheadShare), whatever the batch's
// number of entries: those bytes queued, a chunk being filled
// (chunkBytes), an entry in hand.
func TestReadAheadBoundedByBytes(t *testing.T) {
	const body = 1 << 10
	var yielded atomic.Int64
	big := func(yield func(store.Entry, error) bool) {
		for i := range 400 {
			yielded.Store(int64(i + 1))
			if !yield(store.Entry{Type: "Binary", ID: fmt.Sprint(i), Body: make([]byte, body)}, nil) {
				return
			}
		}
	}
	ra := newReadAhead(store.EntryOptions{BatchEntries: 96, BatchBytes: 10 * body})
	took, most := int64(0), int64(0)
	for range ra.run(big) {
		took++
		most = max(most, yielded.Load()-took)
		time.Sleep(20 * time.Microsecond)
	}
	// A quarter of the batch's bytes (aheadShare) and a chunk: a whole
	// batch more of large resources raised the peak RSS by ~110 MB.
	if ra.maxBytes != 10*body/aheadShare {
		t.Errorf("the queue holds up to %d bytes, want a quarter of BatchBytes %d", ra.maxBytes, 10*body)
	}
	if limit := (10*body/aheadShare+ra.chunkBytes)/body + 2; most > limit || most < 2 {
		t.Errorf("the reader was up to %d entries of %d bytes ahead: want at most %d (a quarter of BatchBytes %d, a chunk of %d bytes, one in hand), and some", most, body, limit, 10*body, ra.chunkBytes)
	}
}

// A reader that panics past where the consumer stopped (an error, too
// many problems) or panicked: the serial path never reached the panic,
// and the consumer's own end stands. Read ahead, the reader reaches it
// first; raised again in the consumer's goroutine it turned a failed
// import's error into a panic, and replaced the consumer's own panic.
// (Its three entries fill no chunk: they reach the consumer only once
// the reader panicked.)
func TestReadAheadReaderPanicPastConsumerStop(t *testing.T) {
	stops := func(seq iter.Seq2[store.Entry, error]) (p any) {
		defer func() { p = recover() }()
		for range seq {
			break
		}
		return nil
	}
	panics := func(seq iter.Seq2[store.Entry, error]) (p any) {
		defer func() { p = recover() }()
		for range seq {
			panic("consumer bug")
		}
		return nil
	}
	for name, consume := range map[string]func(iter.Seq2[store.Entry, error]) any{"stops": stops, "panics": panics} {
		serial, ahead := consume(panickingReader), consume(newReadAhead(store.EntryOptions{}).run(panickingReader))
		if ahead != serial {
			t.Errorf("a consumer that %s: read ahead it ends with panic %v, serial with %v", name, ahead, serial)
		}
		if n := readerGoroutines(); n != 0 {
			t.Errorf("%d reader goroutines left", n)
		}
	}
}

// A consumer that stops stops the reader's read too, where the reader
// yields nothing for a long stretch (here 60,000 read requests of a
// batch Bundle, left out): the reader learnt of the stop only when it
// next queued an entry, and read the rest of its input, at the end
// logging a complete read ("fhirin: read") of an import that had
// failed, which the serial path, stopped at once, never did.
func TestReadAheadConsumerStopEndsTheRead(t *testing.T) {
	f := newLinkFixture(t)
	if _, err := ImportFHIR(context.Background(), f.cat, f.dir(map[string][]string{"Patient": {lnkPat}}), FHIRImport{Tenant: f.tenant, IDKey: f.key, Source: "other"}); err != nil {
		t.Fatal(err)
	}
	// Another source's Patient and more than a batch of new ones (the
	// first batch's commit fails), then the Bundle.
	lines := []string{lnkPat}
	for i := range store.DefaultBatchEntries + 8 {
		lines = append(lines, fmt.Sprintf(`{"resourceType":"Patient","id":"n%d"}`, i))
	}
	dir := f.dir(map[string][]string{"Patient": lines})
	var reads strings.Builder
	reads.WriteString(`{"resourceType":"Bundle","type":"batch","entry":[`)
	for i := range 60000 {
		if i > 0 {
			reads.WriteByte(',')
		}
		fmt.Fprintf(&reads, `{"request":{"method":"GET","url":"Patient/x%d"}}`, i)
	}
	reads.WriteString("]}")
	if err := os.WriteFile(filepath.Join(dir, "reads.json"), []byte(reads.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	defer func(on bool) { readAheadOn = on }(readAheadOn)
	for _, on := range []bool{false, true} {
		readAheadOn = on
		var log strings.Builder
		_, err := ImportFHIR(context.Background(), f.cat, dir, FHIRImport{Tenant: f.tenant, IDKey: f.key,
			Logger: slog.New(slog.NewTextHandler(&log, nil))})
		if err == nil || !strings.Contains(err.Error(), "source") {
			t.Fatalf("read ahead %v: err = %v, want the other source's Patient refused", on, err)
		}
		if strings.Contains(log.String(), "fhirin: read") {
			t.Errorf("read ahead %v: the reader read its input to the end after the import failed:\n%s", on, log.String())
		}
		if n := readerGoroutines(); n != 0 {
			t.Errorf("%d reader goroutines left", n)
		}
	}
}
