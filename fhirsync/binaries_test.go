package fhirsync

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custos-mcp/custos/fhirin"
	"github.com/custos-mcp/custos/store"
)

// stageCarrier stages a Patient p1 and one carrier of type typ (with body
// as its attachment element's JSON at the type's attachment path) and,
// if bin is not "", a Binary of that id; then the manifest naming base.
func stageCarrier(t *testing.T, base, typ, att, bin string) *stage {
	t.Helper()
	st, err := newStage(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]string{
		"Patient": `{"resourceType":"Patient","id":"p1"}`,
		"DocumentReference": `{"resourceType":"DocumentReference","id":"d1","status":"current","subject":{"reference":"Patient/p1"},` +
			`"content":[{"attachment":{"contentType":"text/plain"}},{"attachment":` + att + `}]}`,
		"DiagnosticReport": `{"resourceType":"DiagnosticReport","id":"r1","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/p1"},` +
			`"presentedForm":[` + att + `]}`,
		"Media": `{"resourceType":"Media","id":"m1","status":"completed","subject":{"reference":"Patient/p1"},"content":` + att + `}`,
		// A DocumentReference contained in one: the reader lifts only the
		// resource's own attachments; the contained one's url is a mention.
		"Contained": `{"resourceType":"DocumentReference","id":"d1","status":"current","subject":{"reference":"Patient/p1"},` +
			`"contained":[{"resourceType":"DocumentReference","id":"c1","status":"current","content":[{"attachment":` + att + `}]}],` +
			`"content":[{"attachment":{"contentType":"text/plain"}}]}`,
	}
	for _, ty := range []string{"Patient", typ} {
		ft := ty
		if ty == "Contained" {
			ft = "DocumentReference"
		}
		if _, err := st.copyNDJSON(strings.NewReader(lines[ty]+"\n"), "src", ft, false); err != nil {
			t.Fatal(err)
		}
	}
	if bin != "" {
		b := `{"resourceType":"Binary","id":"` + bin + `","contentType":"text/plain","data":"aGk="}` + "\n"
		if _, err := st.copyNDJSON(strings.NewReader(b), "src", "Binary", false); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := ParseBase(base)
	if err := st.finish(time.Unix(0, 0), stagedRequest(b)); err != nil {
		t.Fatal(err)
	}
	return st
}

func readStaged(st *stage) error {
	return fhirin.Read(context.Background(), filepath.Join(st.dir, ManifestName),
		fhirin.Options{Link: func(typ, id, patient string) string { return "custos://x/" + id }},
		func(fhirin.Item) error { return nil })
}

// TestBinaryRefsAgreeWithReader: the urls the sync fetches a Binary for
// are exactly those custos's reader refuses as dangling when the import
// lacks the Binary, and the Binary fetched is the one the reader wants
// (with it staged, the same input reads). The rule is the reader's
// (fhirin's binaryURL, unexported), restated in binaryID: this test is
// what keeps them together.
func TestBinaryRefsAgreeWithReader(t *testing.T) {
	const base = "https://ehr.example/fhir"
	for _, tc := range []struct {
		typ, att string
		id       string // "" = no Binary to fetch
	}{
		{"DocumentReference", `{"contentType":"text/plain","url":"Binary/b1"}`, "b1"},
		{"DocumentReference", `{"contentType":"text/plain","url":"Binary\/b1"}`, "b1"},
		{"DocumentReference", `{"contentType":"text/plain","url":"\u0042inary/b1"}`, "b1"},
		{"DocumentReference", `{"url":"Binary/b1/_history/2"}`, "b1"},
		{"DocumentReference", `{"url":"https://ehr.example/fhir/Binary/b-1.x"}`, "b-1.x"},
		{"DocumentReference", `{"url":"https://ehr.example/fhir/Binary/b1/_history/3"}`, "b1"},
		{"DiagnosticReport", `{"contentType":"application/pdf","url":"Binary/r1"}`, "r1"},
		{"Media", `{"contentType":"image/jpeg","url":"https://ehr.example/fhir/Binary/m1"}`, "m1"},
		// Scheme and host in any case (RFC 3986; fhirin.NormURL): the
		// same server, as the reader reads it.
		{"DocumentReference", `{"url":"https://EHR.example/fhir/Binary/b1"}`, "b1"},
		{"DocumentReference", `{"url":"HTTPS://ehr.EXAMPLE/fhir/Binary/b1"}`, "b1"},
		{"DocumentReference", `{"url":"https://ehr.example/FHIR/Binary/b1"}`, ""}, // a path's case counts
		// Left alone by the reader, so by the sync.
		{"DocumentReference", `{"url":"https://other.example/fhir/Binary/b1"}`, ""},
		{"DocumentReference", `{"url":"http://ehr.example/fhir/Binary/b1"}`, ""},
		{"DocumentReference", `{"url":"https://ehr.example/fhir/R4/Binary/b1"}`, ""},
		{"DocumentReference", `{"url":"https://ehr.example/Binary/b1"}`, ""},
		{"DocumentReference", `{"url":"https://ehr.example/fhir/Binary/b1/"}`, ""},
		{"DocumentReference", `{"url":"Binary/b1?_format=json"}`, ""},
		{"DocumentReference", `{"url":"Binary/b1#x"}`, ""},
		{"DocumentReference", `{"url":"a/b/Binary/b1"}`, ""},
		{"DocumentReference", `{"url":"/Binary/b1"}`, ""},
		{"DocumentReference", `{"url":"Binary/b_1"}`, ""},
		{"DocumentReference", `{"url":"Binary/"}`, ""},
		{"DocumentReference", `{"url":"Binary/b1/_history"}`, ""},
		{"DocumentReference", `{"url":"docs/note.pdf"}`, ""},
		// Percent-escapes, dot segments and doubled slashes: no
		// normalization on either side (a dot-segment id is then refused
		// by the fetch: TestFetchBinaryDotSegmentID).
		{"DocumentReference", `{"url":"Binary/b%31"}`, ""},
		{"DocumentReference", `{"url":"Binary%2Fb1"}`, ""},
		{"DocumentReference", `{"url":"https://ehr.example/fhir/../fhir/Binary/b1"}`, ""},
		{"DocumentReference", `{"url":"https://ehr.example/fhir//Binary/b1"}`, ""},
		{"DocumentReference", `{"url":"https://ehr.example/fhir/Binary/b1/_history/2/"}`, ""},
		{"DocumentReference", `{"url":"Binary/.."}`, ".."},
		{"DocumentReference", `{"url":"Patient/p1"}`, ""}, // the reader's ErrValue
		{"DocumentReference", `{"contentType":"text/plain","data":"aGk=","url":"Binary/b1"}`, ""},
		{"DocumentReference", `{"url":7}`, ""},
		{"Contained", `{"contentType":"text/plain","url":"Binary/b1"}`, ""},
	} {
		name := tc.typ + " " + tc.att
		st := stageCarrier(t, base, tc.typ, tc.att, "")
		refs, err := st.missingBinaries(base)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rerr := readStaged(st)
		if tc.id == "" {
			if len(refs) != 0 || errors.Is(rerr, fhirin.ErrDangling) {
				t.Errorf("%s: the sync would fetch %v; the reader says %v; want neither to want a Binary", name, refs, rerr)
			}
			continue
		}
		if len(refs) != 1 || refs[0].ID != tc.id || !errors.Is(rerr, fhirin.ErrDangling) {
			t.Errorf("%s: the sync would fetch %v; the reader says %v; want %s and ErrDangling", name, refs, rerr, tc.id)
			continue
		}
		if !strings.Contains(refs[0].Where, "staged "+tc.typ+".000.ndjson line 1: "+tc.typ+".") || !strings.HasSuffix(refs[0].Where, ".url") {
			t.Errorf("%s: place %q", name, refs[0].Where)
		}
		// With that Binary staged the reader is content, and the sync
		// fetches nothing.
		st = stageCarrier(t, base, tc.typ, tc.att, tc.id)
		if refs, _ := st.missingBinaries(base); len(refs) != 0 {
			t.Errorf("%s: with the Binary staged the sync would fetch %v", name, refs)
		}
		if err := readStaged(st); err != nil {
			t.Errorf("%s: with Binary %s staged the reader says %v", name, tc.id, err)
		}
	}
}

// TestMissingBinariesOnce: a Binary named by several attachments is
// fetched once; the place named is the first.
func TestMissingBinariesOnce(t *testing.T) {
	st, err := newStage(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	docs := `{"resourceType":"DocumentReference","id":"d1","content":[{"attachment":{"url":"Binary/b1"}},{"attachment":{"url":"Binary/b2"}}]}` + "\n" +
		`{"resourceType":"DocumentReference","id":"d2","content":[{"attachment":{"url":"Binary/b2"}},{"attachment":{"url":"Binary/b3"}}]}` + "\n"
	if _, err := st.copyNDJSON(strings.NewReader(docs), "src", "DocumentReference", false); err != nil {
		t.Fatal(err)
	}
	if _, err := st.copyNDJSON(strings.NewReader(`{"resourceType":"Binary","id":"b3"}`+"\n"), "src", "Binary", false); err != nil {
		t.Fatal(err)
	}
	refs, err := st.missingBinaries("https://ehr.example/fhir")
	if err != nil {
		t.Fatal(err)
	}
	want := []binaryRef{
		{ID: "b1", Where: "staged DocumentReference.000.ndjson line 1: DocumentReference.content[0].attachment.url"},
		{ID: "b2", Where: "staged DocumentReference.000.ndjson line 1: DocumentReference.content[1].attachment.url"},
	}
	if len(refs) != len(want) || refs[0] != want[0] || refs[1] != want[1] {
		t.Fatalf("refs %+v, want %+v", refs, want)
	}
}

// binaryServer is an httptest server answering GET /fhir/Binary/<id> with
// handler; it returns a client of the sync for it.
func binaryServer(t *testing.T, handler http.HandlerFunc) *client {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	o := Options{Base: srv.URL + "/fhir", StateDir: t.TempDir(), Importer: ImporterFunc(nil), Recorder: nopRecorder{},
		MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond, MaxLine: 1 << 10}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	base, _ := ParseBase(o.Base)
	return &client{o: &o, base: base, creds: &credentials{}}
}

type nopRecorder struct{}

func (nopRecorder) RecordSync(context.Context, Event) error { return nil }

// TestFetchBinaries: what a server answers for GET [base]/Binary/<id> and
// what the sync makes of it: the Binary resource, the raw content wrapped
// into one, or an error naming the attachment's place and the request,
// never the answer's content or the patient.
func TestFetchBinaries(t *testing.T) {
	const doc = `{"resourceType":"DocumentReference","id":"d1","subject":{"reference":"Patient/p1"},"content":[{"attachment":{"contentType":"application/pdf","url":"Binary/b1"}}]}`
	pdf := "%PDF-1.4 secret note of the patient"
	for _, tc := range []struct {
		name    string
		h       http.HandlerFunc
		want    string // the staged Binary line
		wantErr error  // or the error's sentinel
		errHas  string
	}{
		{"resource", func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Accept") != "application/fhir+json" {
				http.Error(w, "accept", 400)
				return
			}
			w.Header().Set("Content-Type", "application/fhir+json; charset=utf-8")
			w.Write([]byte("{\n \"resourceType\": \"Binary\", \"id\": \"b1\", \"contentType\": \"application/pdf\", \"data\": \"JVBERg==\"}"))
		}, `{"resourceType":"Binary","id":"b1","contentType":"application/pdf","data":"JVBERg=="}`, nil, ""},
		{"raw content", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/pdf")
			w.Write([]byte(pdf))
		}, `{"resourceType":"Binary","id":"b1","contentType":"application/pdf","data":"` + base64.StdEncoding.EncodeToString([]byte(pdf)) + `"}`, nil, ""},
		{"503 then resource", func() http.HandlerFunc {
			n := 0
			return func(w http.ResponseWriter, r *http.Request) {
				if n++; n == 1 {
					w.WriteHeader(503)
					return
				}
				w.Header().Set("Content-Type", "application/fhir+json")
				w.Write([]byte(`{"resourceType":"Binary","id":"b1","contentType":"application/pdf","data":"JVBERg=="}`))
			}
		}(), `{"resourceType":"Binary","id":"b1","contentType":"application/pdf","data":"JVBERg=="}`, nil, ""},
		{"404", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/fhir+json")
			w.WriteHeader(404)
			w.Write([]byte(`{"resourceType":"OperationOutcome"}`))
		}, "", ErrServer, "GET /fhir/Binary/[id]: HTTP 404"},
		{"403", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(403) }, "", ErrAuth, "GET /fhir/Binary/[id]: HTTP 403"},
		{"always 500", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }, "", ErrUnavailable, "gave up after 3 attempts"},
		{"garbage JSON", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/fhir+json")
			w.Write([]byte(`{"resourceType":"Binary","id":"b1","data":"` + pdf))
		}, "", ErrServer, "not a complete JSON value"},
		{"another resource", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/fhir+json")
			w.Write([]byte(`{"resourceType":"OperationOutcome","id":"x"}`))
		}, "", ErrServer, `resourceType "OperationOutcome"`},
		{"another Binary", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/fhir+json")
			w.Write([]byte(`{"resourceType":"Binary","id":"b9","contentType":"text/plain","data":"aGk="}`))
		}, "", ErrServer, "another Binary"},
		{"no data", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/fhir+json")
			w.Write([]byte(`{"resourceType":"Binary","id":"b1","contentType":"application/pdf"}`))
		}, "", ErrServer, "without data"},
		{"data not base64", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/fhir+json")
			w.Write([]byte(`{"resourceType":"Binary","id":"b1","contentType":"application/pdf","data":"JVBER*g=="}`))
		}, "", ErrServer, "not base64"},
		{"data not a string", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/fhir+json")
			w.Write([]byte(`{"resourceType":"Binary","id":"b1","contentType":"application/pdf","data":7}`))
		}, "", ErrServer, "not base64"},
		{"no contentType", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/fhir+json")
			w.Write([]byte(`{"resourceType":"Binary","id":"b1","data":"JVBERg=="}`))
		}, "", ErrServer, "without a contentType"},
		{"data with whitespace", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/fhir+json")
			w.Write([]byte(`{"resourceType":"Binary","id":"b1","contentType":"application/pdf","data":"JVBE\nRg =="}`))
		}, `{"resourceType":"Binary","id":"b1","contentType":"application/pdf","data":"JVBE\nRg =="}`, nil, ""},
		{"raw JSON content", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"resourceType":"Binary","id":"b1","contentType":"application/pdf","data":"JVBERg=="}`))
		}, `{"resourceType":"Binary","id":"b1","contentType":"application/pdf","data":"JVBERg=="}`, nil, ""},
		{"a login page with 200", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<html>please log in " + pdf + "</html>"))
		}, "", ErrServer, "the answer is text/html, not a Binary resource nor the application/pdf the attachment declares"},
		{"no Content-Type", func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Content-Type"] = nil
			w.Write([]byte(pdf))
		}, "", ErrServer, "Content-Type"},
		{"too long", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/pdf")
			w.Write([]byte(strings.Repeat("A", 2<<10)))
		}, "", ErrServer, "longer than 1024 bytes"},
		{"too long once encoded", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/pdf")
			w.Write([]byte(strings.Repeat("A", 900)))
		}, "", ErrServer, "base64-encoded into a Binary, is longer than 1024 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := binaryServer(t, tc.h)
			c.auth = nil
			st, err := newStage(t.TempDir(), 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.copyNDJSON(strings.NewReader(doc+"\n"), "src", "DocumentReference", false); err != nil {
				t.Fatal(err)
			}
			n, err := c.fetchBinaries(context.Background(), st, true)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("err = %v, want %v with %q", err, tc.wantErr, tc.errHas)
				}
				msg := err.Error()
				if !strings.HasPrefix(msg, "staged DocumentReference.000.ndjson line 1: DocumentReference.content[0].attachment.url: ") ||
					strings.Contains(msg, "secret") || strings.Contains(msg, "p1") || strings.Contains(msg, "b1") {
					t.Fatalf("err = %q: want the place first, and neither content, patient nor the Binary's source id", msg)
				}
				if _, ok := st.next["Binary"]; ok || st.counts["Binary"] != 0 {
					t.Fatalf("a failed fetch staged a Binary file")
				}
				return
			}
			if err != nil || n != 1 {
				t.Fatalf("fetched %d, %v", n, err)
			}
			var got string
			if err := st.eachLine("Binary.000.ndjson", func(line []byte, _ int) error { got = string(line); return nil }); err != nil {
				t.Fatal(err)
			}
			if got != tc.want || st.counts["Binary"] != 1 || st.m.Output[len(st.m.Output)-1].URL != "Binary.000.ndjson" {
				t.Fatalf("staged %s (counts %v), want %s", got, st.counts, tc.want)
			}
			var v map[string]any
			if json.Unmarshal([]byte(got), &v) != nil {
				t.Fatal("not JSON")
			}
		})
	}
}

// liveCatalog is an Importer whose catalog holds the Binaries live (a
// fake of the importer's answer: the rule under test is the sync's).
type liveCatalog struct {
	live  map[string]bool
	err   error
	asked []string
}

func (l *liveCatalog) Import(context.Context, string, bool) (Imported, error) { return Imported{}, nil }

func (l *liveCatalog) LiveBinaries(_ context.Context, ids []string) (map[string]bool, error) {
	l.asked = append(l.asked, ids...)
	return l.live, l.err
}

// TestFetchBinariesSkipsLive: an increment does not fetch a Binary the
// importer's catalog holds live (BinaryCatalog); a full sync fetches it
// again; a catalog that cannot answer fails the sync (ErrImport).
func TestFetchBinariesSkipsLive(t *testing.T) {
	var (
		mu  sync.Mutex // Binaries are fetched concurrently
		got []string
	)
	c := binaryServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("note"))
	})
	cat := &liveCatalog{live: map[string]bool{"b1": true}}
	c.o.Importer = cat
	const docs = `{"resourceType":"DocumentReference","id":"d1","content":[{"attachment":{"url":"Binary/b1"}},{"attachment":{"url":"Binary/b2"}}]}` + "\n"
	for _, tc := range []struct {
		full bool
		want []string
	}{
		{false, []string{"/fhir/Binary/b2"}},
		{true, []string{"/fhir/Binary/b1", "/fhir/Binary/b2"}},
	} {
		got, cat.asked = nil, nil
		st, err := newStage(t.TempDir(), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.copyNDJSON(strings.NewReader(docs), "src", "DocumentReference", false); err != nil {
			t.Fatal(err)
		}
		n, err := c.fetchBinaries(context.Background(), st, tc.full)
		slices.Sort(got)
		if err != nil || n != len(tc.want) || strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("full=%v: fetched %d %v, %v; want %v", tc.full, n, got, err, tc.want)
		}
		if wantAsked := map[bool]string{false: "b1 b2", true: ""}[tc.full]; strings.Join(cat.asked, " ") != wantAsked {
			t.Errorf("full=%v: asked the catalog about %v, want %q", tc.full, cat.asked, wantAsked)
		}
	}
	cat.err = errors.New("catalog locked")
	st, _ := newStage(t.TempDir(), 1<<20)
	st.copyNDJSON(strings.NewReader(docs), "src", "DocumentReference", false)
	if _, err := c.fetchBinaries(context.Background(), st, false); !errors.Is(err, ErrImport) {
		t.Fatalf("a catalog that cannot answer: %v, want ErrImport", err)
	}
}

// TestFetchBinariesConcurrently: the Binaries an export lacks are fetched
// up to Options.BinaryFetches at once, never more (they were fetched one
// at a time: 0.6-0.8 ms each on loopback, ~25 s more per 500 from a server
// 50 ms away), and staged in the attachments' order whatever order they
// arrive in; a failure names its own attachment's place, and nothing is
// staged.
//
//custos:race
func TestFetchBinariesConcurrently(t *testing.T) {
	const n = 10
	var doc strings.Builder
	doc.WriteString(`{"resourceType":"DocumentReference","id":"d1","content":[`)
	for i := range n {
		if i > 0 {
			doc.WriteString(",")
		}
		fmt.Fprintf(&doc, `{"attachment":{"contentType":"text/plain","url":"Binary/b%d"}}`, i)
	}
	doc.WriteString("]}\n")
	for _, tc := range []struct {
		name    string
		fetches int
		fail    string // the Binary answered 404
	}{{"default", 0, ""}, {"two at once", 2, ""}, {"one fails", 0, "b5"}} {
		t.Run(tc.name, func(t *testing.T) {
			var inFlight, most atomic.Int32
			c := binaryServer(t, func(w http.ResponseWriter, r *http.Request) {
				now := inFlight.Add(1)
				defer inFlight.Add(-1)
				for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
				}
				// Wait a little for company (at most 1 s, so that a
				// serial fetch fails in seconds, not hangs), then answer
				// the later Binaries first.
				for deadline := time.Now().Add(time.Second); inFlight.Load() < 2 && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
				id := strings.TrimPrefix(r.URL.Path, "/fhir/Binary/")
				i, _ := strconv.Atoi(strings.TrimPrefix(id, "b"))
				time.Sleep(time.Duration(n-i) * 3 * time.Millisecond)
				if id == tc.fail {
					w.WriteHeader(404)
					return
				}
				w.Header().Set("Content-Type", "text/plain")
				w.Write([]byte("note " + id))
			})
			c.auth = nil
			if tc.fetches != 0 {
				c.o.BinaryFetches = tc.fetches
			}
			limit := int32(c.o.BinaryFetches)
			if want := cmp.Or(tc.fetches, DefaultBinaryFetches); limit != int32(want) {
				t.Fatalf("BinaryFetches %d, want %d", limit, want)
			}
			st, err := newStage(t.TempDir(), 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.copyNDJSON(strings.NewReader(doc.String()), "src", "DocumentReference", false); err != nil {
				t.Fatal(err)
			}
			got, err := c.fetchBinaries(context.Background(), st, true)
			if m := most.Load(); m < 2 || m > limit {
				t.Errorf("at most %d Binary requests in flight at once, want 2 to %d", m, limit)
			}
			if tc.fail != "" {
				want := "staged DocumentReference.000.ndjson line 1: DocumentReference.content[5].attachment.url: "
				if !errors.Is(err, ErrServer) || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "b5") {
					t.Fatalf("err = %v, want ErrServer naming content[5]'s place and not the id", err)
				}
				if _, ok := st.next["Binary"]; ok || st.counts["Binary"] != 0 {
					t.Fatal("a failed fetch staged a Binary file")
				}
				return
			}
			if err != nil || got != n {
				t.Fatalf("fetched %d, %v", got, err)
			}
			var ids []string
			if err := st.eachLine("Binary.000.ndjson", func(line []byte, _ int) error {
				var b struct{ ID string }
				if err := json.Unmarshal(line, &b); err != nil {
					return err
				}
				ids = append(ids, b.ID)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			for i, id := range ids {
				if id != fmt.Sprintf("b%d", i) {
					t.Fatalf("staged %v, want b0 to b%d in the attachments' order", ids, n-1)
				}
			}
			if len(ids) != n {
				t.Fatalf("staged %d Binaries, want %d", len(ids), n)
			}
		})
	}
}

// TestFetchBinaryLogHidesID: a Binary fetch the server answers 503 is
// retried, and the retry's log line names the request as the error does,
// /Binary/[id]: a source id may carry PHI (an MRN used as an id), and the
// operational log is no place for it (found reviewing h-binfetch: the
// error hid it, the log line did not).
func TestFetchBinaryLogHidesID(t *testing.T) {
	n := 0
	c := binaryServer(t, func(w http.ResponseWriter, r *http.Request) {
		if n++; n == 1 {
			w.WriteHeader(503)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("note"))
	})
	var logs bytes.Buffer
	c.o.Logger = slogTo(&logs)
	st, err := newStage(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	doc := `{"resourceType":"DocumentReference","id":"d1","content":[{"attachment":{"contentType":"text/plain","url":"Binary/MRN-4711"}}]}` + "\n"
	if _, err := st.copyNDJSON(strings.NewReader(doc), "src", "DocumentReference", false); err != nil {
		t.Fatal(err)
	}
	if got, err := c.fetchBinaries(context.Background(), st, true); err != nil || got != 1 {
		t.Fatalf("fetched %d, %v", got, err)
	}
	if !strings.Contains(logs.String(), "retrying") {
		t.Fatalf("no retry logged: %s", logs.String())
	}
	if strings.Contains(logs.String(), "MRN-4711") || !strings.Contains(logs.String(), "/fhir/Binary/[id]") {
		t.Errorf("the retry's log line names the Binary's source id, want /Binary/[id]:\n%s", logs.String())
	}
}

// TestFetchBinaryDotSegmentID: "." and ".." are FHIR ids by the regex
// (the reader reads Binary/.. as Binary ".."), but as a path segment
// they are dot segments: GET [base]/Binary/.. resolves to [base]/ and
// Binary/. to [base]/Binary/, the search of every Binary on the server,
// whose answer served as application/json was taken as the content of
// the attachment declaring application/json. Such an id is refused
// before any request (found reviewing h-binfetch).
func TestFetchBinaryDotSegmentID(t *testing.T) {
	for _, id := range []string{".", ".."} {
		var got []string
		c := binaryServer(t, func(w http.ResponseWriter, r *http.Request) {
			got = append(got, r.URL.Path)
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"resourceType":"Bundle","type":"searchset","entry":[{"resource":{"resourceType":"Binary","id":"other-patient"}}]}`))
		})
		st, err := newStage(t.TempDir(), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		doc := `{"resourceType":"DocumentReference","id":"d1","content":[{"attachment":{"contentType":"application/json","url":"Binary/` + id + `"}}]}` + "\n"
		if _, err := st.copyNDJSON(strings.NewReader(doc), "src", "DocumentReference", false); err != nil {
			t.Fatal(err)
		}
		n, err := c.fetchBinaries(context.Background(), st, true)
		if err == nil || len(got) != 0 {
			t.Errorf("Binary/%s: fetched %d (requests %v), %v; want refused before any request", id, n, got, err)
			continue
		}
		if !errors.Is(err, ErrServer) || !strings.Contains(err.Error(), "dot segment") ||
			!strings.HasPrefix(err.Error(), "staged DocumentReference.000.ndjson line 1: DocumentReference.content[0].attachment.url: ") {
			t.Errorf("Binary/%s: %v; want ErrServer naming the place and the dot segment", id, err)
		}
	}
}

// TestFetchBinaryRedirectHidesPath: a Binary read the server redirects
// within its origin to where it keeps the file (a path that may name the
// patient or the document) and whose answer is refused names the request
// custos made, GET [base]/Binary/[id], not the redirect's path (found
// reviewing h-binfetch: the error named resp.Request.URL, the last
// request's).
func TestFetchBinaryRedirectHidesPath(t *testing.T) {
	c := binaryServer(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/fhir/Binary/") {
			http.Redirect(w, r, "/files/MRN-4711-discharge.pdf", http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html>please log in</html>"))
	})
	st, err := newStage(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	doc := `{"resourceType":"DocumentReference","id":"d1","content":[{"attachment":{"contentType":"application/pdf","url":"Binary/b1"}}]}` + "\n"
	if _, err := st.copyNDJSON(strings.NewReader(doc), "src", "DocumentReference", false); err != nil {
		t.Fatal(err)
	}
	_, err = c.fetchBinaries(context.Background(), st, true)
	if !errors.Is(err, ErrServer) || strings.Contains(err.Error(), "MRN-4711") || !strings.Contains(err.Error(), "GET /fhir/Binary/[id]: the answer is text/html") {
		t.Fatalf("err = %v; want ErrServer naming GET /fhir/Binary/[id], not the redirect's path", err)
	}
}

// TestFetchBinaryTakesWhatImportTakes: with the default options, a Binary
// as large as the store keeps (store.MaxBlobSize, 64 MiB) that the server
// answers with its content is staged as a line custos import reads. Until
// the review of h-docs the sync's line limit was 64 MiB, below the
// content's base64 (about 85 MiB), so the sync refused a document that
// `custos import` of the same export takes (fhirin.DefaultMaxLine, 96
// MiB: a 64 MiB blob in base64 with the resource around it).
func TestFetchBinaryTakesWhatImportTakes(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates ~300 MB")
	}
	content := bytes.Repeat([]byte{0x25, 0x50, 0x44, 0x46}, store.MaxBlobSize/4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/pdf")
		w.Write(content)
	}))
	t.Cleanup(srv.Close)
	o := Options{Base: srv.URL + "/fhir", StateDir: t.TempDir(), Importer: ImporterFunc(nil), Recorder: nopRecorder{}}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	base, _ := ParseBase(o.Base)
	c := &client{o: &o, base: base, creds: &credentials{}}
	line, err := c.fetchBinary(context.Background(), binaryRef{ID: "scan1", ContentType: "application/pdf"})
	if err != nil {
		t.Fatalf("fetchBinary of a %d-byte Binary: %v; want it staged, as custos import reads its line", len(content), err)
	}
	if len(line) > fhirin.DefaultMaxLine || len(line) <= 64<<20 {
		t.Fatalf("the staged line is %d bytes; want more than 64 MiB (the case) and at most fhirin.DefaultMaxLine", len(line))
	}
}

// TestBinaryContentTooLongIsRefusedBeforeEncoding: content answered as
// itself whose base64 cannot fit a line (Options.MaxLine) is refused
// before it is encoded: the encoding and the Binary's JSON were built
// (about 2.7 times the content, on top of the answer held) and only then
// measured, so four concurrent fetches of 96 MiB answers (DefaultMaxLine)
// allocated over a gigabyte to refuse them.
func TestBinaryContentTooLongIsRefusedBeforeEncoding(t *testing.T) {
	const max = 4 << 20
	body := bytes.Repeat([]byte{'%'}, max*3/4+1) // its base64 alone exceeds max
	resp := &http.Response{Header: http.Header{"Content-Type": {"application/pdf"}}, Request: httptest.NewRequest("GET", "http://x/fhir/Binary/b", nil)}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := binaryLine(resp, body, binaryRef{ID: "b", ContentType: "application/pdf"}, max)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrServer) || !strings.Contains(err.Error(), "base64-encoded into a Binary, is longer than") {
		t.Fatalf("err = %v; want ErrServer: the content, base64-encoded, is too long", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > uint64(len(body)) {
		t.Errorf("refusing %d bytes of content allocated %d bytes; want it refused before it is encoded", len(body), n)
	}
}
