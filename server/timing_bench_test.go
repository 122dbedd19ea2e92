package server_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/store"
)

// readKind is one kind of read the timing benchmarks make: a resource the
// caller may not read, a missing resource of the same patient, or one of a
// patient that does not exist.
type readKind struct{ name, uri string }

// timedReads sets up the reads of the timing benchmarks on a new fixture:
// the three kinds, and read, which makes one read of a URI through the
// real HTTP handler chain (dev token, protocol 2026-07-28, one POST a
// read, the audit log a bbolt file on disk) and returns how long the
// handler took. After 50 reads of each kind (warm-up), every kind has
// been read alike, so that what follows compares like with like.
func timedReads(b *testing.B) (kinds []readKind, read func(uri string) time.Duration) {
	f := newFixture(b, "")
	hidden, missing := hiddenAndMissing(b, f, "clinician")
	u, _ := store.ParseURI(missing)
	u.Patient = "00000000-0000-4000-8000-0000000000aa"
	noPatient := u.String()
	h, hs := f.httpHandler("clinician")
	tok := hs.tokens["clinician"]
	read = func(uri string) time.Duration {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{"uri":"`+uri+`",`+meta2026("}}")))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Mcp-Protocol-Version", rev2026)
		req.Header.Set("Mcp-Method", "resources/read")
		req.Header.Set("Mcp-Name", uri)
		w := httptest.NewRecorder()
		t0 := time.Now()
		h.ServeHTTP(w, req)
		d := time.Since(t0)
		if !strings.Contains(w.Body.String(), `"uri":"`+uri+`"`) {
			b.Fatalf("read %s: %d %s", uri, w.Code, w.Body)
		}
		return d
	}
	kinds = []readKind{{"denied", hidden}, {"missing", missing}, {"nopatient", noPatient}}
	for range 50 { // warm up
		for _, k := range kinds {
			read(k.uri)
		}
	}
	return kinds, read
}

// BenchmarkDeniedVsMissingRead times reads of the three kinds (timedReads)
// and reports the median and 10th percentile of each in microseconds.
// Denied and not found answer the same bytes
// (TestDeniedAndMissingAreAlikeOnTheWire); this measures how alike they
// are in time (SECURITY.md, "Side channel"). Interleaved, so that the
// load of a shared machine falls on the three alike.
//
//	go test ./server/ -run '^$' -bench DeniedVsMissingRead -benchtime 2000x -count 5
func BenchmarkDeniedVsMissingRead(b *testing.B) {
	kinds, read := timedReads(b)
	times := make([][]time.Duration, len(kinds))
	b.ResetTimer()
	for i := range b.N {
		for j := range kinds {
			k := (i + j) % len(kinds) // rotate the order too
			times[k] = append(times[k], read(kinds[k].uri))
		}
	}
	b.StopTimer()
	for k, ts := range times {
		slices.Sort(ts)
		b.ReportMetric(float64(ts[len(ts)/2].Microseconds()), kinds[k].name+"-p50-us")
		b.ReportMetric(float64(ts[len(ts)/10].Microseconds()), kinds[k].name+"-p10-us")
	}
}

// BenchmarkReadOfOneKind makes b.N reads of one kind only (after the same
// warm-up of all three), one sub-benchmark a kind, so that a profiler or
// an instruction counter sees one path at a time: run each sub-benchmark
// in its own process at two b.N and divide the difference of the counts
// by the difference of b.N, which cancels the fixture's setup
// (SECURITY.md, "Side channel"; docs/benchmarks.md). Under valgrind the
// Go runtime needs asynchronous preemption and RDTSCP off, and the audit
// log a small file system (the live segment's mapping is the size of its
// file system, more address space than valgrind gives):
//
//	CGO_ENABLED=0 go test -c -o /tmp/server.test ./server/
//	cd server && GOMAXPROCS=1 TMPDIR=/dev/shm GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off \
//	  valgrind --tool=callgrind /tmp/server.test -test.run '^$' -test.bench 'ReadOfOneKind/denied$' -test.benchtime 420x
func BenchmarkReadOfOneKind(b *testing.B) {
	for _, name := range []string{"denied", "missing", "nopatient"} {
		b.Run(name, func(b *testing.B) {
			kinds, read := timedReads(b)
			i := slices.IndexFunc(kinds, func(k readKind) bool { return k.name == name })
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				read(kinds[i].uri)
			}
		})
	}
}
