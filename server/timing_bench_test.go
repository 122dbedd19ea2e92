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

// BenchmarkDeniedVsMissingRead times reads through the real HTTP handler
// chain (dev token, protocol 2026-07-28, one POST a read, the audit log a
// bbolt file on disk), alternating a resource the caller may not read, a
// missing resource of the same patient and one of a patient that does not
// exist, and reports the median and 10th percentile of each in
// microseconds. Denied and not found answer the same bytes
// (TestDeniedAndMissingAreAlikeOnTheWire); this measures how alike they
// are in time (SECURITY.md, "Side channel"). Interleaved, so that the
// load of a shared machine falls on the three alike.
//
//	go test ./server/ -run '^$' -bench DeniedVsMissingRead -benchtime 2000x -count 5
func BenchmarkDeniedVsMissingRead(b *testing.B) {
	f := newFixture(b, "")
	hidden, missing := hiddenAndMissing(b, f, "clinician")
	u, _ := store.ParseURI(missing)
	u.Patient = "00000000-0000-4000-8000-0000000000aa"
	noPatient := u.String()
	h, hs := f.httpHandler("clinician")
	tok := hs.tokens["clinician"]
	read := func(uri string) time.Duration {
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
	kinds := []struct{ name, uri string }{{"denied", hidden}, {"missing", missing}, {"nopatient", noPatient}}
	times := make([][]time.Duration, len(kinds))
	for range 50 { // warm up
		for _, k := range kinds {
			read(k.uri)
		}
	}
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
