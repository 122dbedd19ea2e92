package fhirin

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A Binary's securityContext that names a resource other than a Patient
// (R4: "a proxy of the security sensitivity to use when deciding and
// enforcing access control rules for the Binary resource", a
// DocumentReference say) was ignored: a Binary whose securityContext named
// an HIV-labelled DocumentReference, linked by an unlabelled
// DiagnosticReport, was imported without hiv, readable by a caller kept
// from the DocumentReference. Found by probe-import3. The Binary now has
// the labels of the resource its securityContext names, and is in that
// resource's compartment: placed there when nothing links it, refused when
// a resource of another compartment links it. The order of the input, the
// kind of file (a type the first pass skips), and a Bundle's urn:uuid
// reference do not matter.
func TestReadBinarySecurityContextResource(t *testing.T) {
	const (
		hiv = `{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"HIV"}`
		pat = `{"resourceType":"Patient","id":"p"}`
		// d1: HIV-labelled, the proxy of b1's sensitivity; it links no Binary.
		d1 = `{"resourceType":"DocumentReference","id":"d1","meta":{"security":[` + hiv + `]},"status":"current","subject":{"reference":"Patient/p"},"content":[{"attachment":{"contentType":"text/plain","url":"https://elsewhere.example/doc/1"}}]}`
		// r1: unlabelled, links b1.
		r1 = `{"resourceType":"DiagnosticReport","id":"r1","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/p"},"presentedForm":[{"contentType":"text/plain","url":"Binary/b1"}]}`
		b1 = `{"resourceType":"Binary","id":"b1","securityContext":{"reference":"DocumentReference/d1"},"contentType":"text/plain","data":"SElWIHBvc2l0aXZl"}`
		// o1: an Observation (a type the first pass skips unless it names a
		// Binary) labelled psy, the proxy of b2, which nothing links.
		o1 = `{"resourceType":"Observation","id":"o1","meta":{"security":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"PSY"}]},"status":"final","code":{"text":"x"},"subject":{"reference":"Patient/p"}}`
		b2 = `{"resourceType":"Binary","id":"b2","securityContext":{"reference":"Observation/o1"},"contentType":"text/plain","data":"bm90ZQ=="}`
	)
	want := []struct {
		typ, id, patient string
		labels           []string
	}{
		{"Binary", "b1", "p", []string{"hiv"}},
		{"DiagnosticReport", "r1", "p", []string{"hiv"}},
		{"DocumentReference", "d1", "p", []string{"hiv"}},
		{"Binary", "b2", "p", []string{"psy"}},
		{"Observation", "o1", "p", []string{"psy"}},
	}
	check := func(t *testing.T, p string) {
		t.Helper()
		items := mustReadAll(t, p)
		for _, w := range want {
			it := find(t, items, w.typ, w.id)
			if !slices.Equal(it.Sensitivity, w.labels) || it.Patient != w.patient {
				t.Errorf("%s %s: patient %q labels %v, want %q %v", w.typ, w.id, it.Patient, it.Sensitivity, w.patient, w.labels)
			}
		}
	}
	for name, lines := range map[string][]string{
		"binaries-first": {pat, b1, b2, r1, d1, o1},
		"binaries-last":  {pat, d1, o1, r1, b1, b2},
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "Mixed.ndjson")
			if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			check(t, p)
		})
	}
	t.Run("export", func(t *testing.T) {
		dir := t.TempDir()
		for name, lines := range map[string][]string{
			"Patient.ndjson": {pat}, "Observation.ndjson": {o1}, "DocumentReference.ndjson": {d1},
			"DiagnosticReport.ndjson": {r1}, "Binary.ndjson": {b1, b2},
		} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		check(t, dir)
	})
	t.Run("bundle", func(t *testing.T) {
		entry := func(uuid, res string) string {
			return `{"fullUrl":"urn:uuid:` + uuid + `","resource":` + res + `}`
		}
		b1u := strings.Replace(b1, `"DocumentReference/d1"`, `"urn:uuid:00000000-0000-4000-8000-000000000001"`, 1)
		p := filepath.Join(t.TempDir(), "b.json")
		bundle := `{"resourceType":"Bundle","type":"collection","entry":[` + strings.Join([]string{
			entry("00000000-0000-4000-8000-000000000000", pat), entry("00000000-0000-4000-8000-000000000002", b1u),
			entry("00000000-0000-4000-8000-000000000003", r1), entry("00000000-0000-4000-8000-000000000001", d1),
			entry("00000000-0000-4000-8000-000000000004", o1), entry("00000000-0000-4000-8000-000000000005", b2),
		}, ",\n") + "]}\n"
		if err := os.WriteFile(p, []byte(bundle), 0o644); err != nil {
			t.Fatal(err)
		}
		check(t, p)
	})
	t.Run("another compartment", func(t *testing.T) {
		// r1 links b1 from patient q; b1's securityContext is p's d1.
		rq := strings.Replace(r1, `"Patient/p"`, `"Patient/q"`, 1)
		p := filepath.Join(t.TempDir(), "Mixed.ndjson")
		if err := os.WriteFile(p, []byte(strings.Join([]string{pat, d1, rq, b1}, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := readAll(t, p)
		if !errors.Is(err, ErrCompartment) || !strings.Contains(err.Error(), "Binary.securityContext") {
			t.Fatalf("err = %v, want ErrCompartment at Binary.securityContext", err)
		}
	})
}

// A Binary whose securityContext names another Binary (R4 allows any
// resource) has that Binary's labels and compartment, whatever gave them
// (its own securityContext's resource, a resource linking it): b0 names
// b1, whose securityContext is the HIV-labelled d1, and an unlabelled
// DiagnosticReport links b0. ctxTarget gave b0 only b1's meta.security
// (none), and b0 was imported without hiv. Found reviewing probe-import3
// (h-review21).
func TestReadBinarySecurityContextBinary(t *testing.T) {
	const (
		hiv = `{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"HIV"}`
		pat = `{"resourceType":"Patient","id":"p"}`
		d1  = `{"resourceType":"DocumentReference","id":"d1","meta":{"security":[` + hiv + `]},"status":"current","subject":{"reference":"Patient/p"},"content":[{"attachment":{"contentType":"text/plain","url":"https://elsewhere.example/doc/1"}}]}`
		b1  = `{"resourceType":"Binary","id":"b1","securityContext":{"reference":"DocumentReference/d1"},"contentType":"text/plain","data":"SElWIHBvc2l0aXZl"}`
		b0  = `{"resourceType":"Binary","id":"b0","securityContext":{"reference":"Binary/b1"},"contentType":"text/plain","data":"SElWIHBvc2l0aXZl"}`
		r0  = `{"resourceType":"DiagnosticReport","id":"r0","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/p"},"presentedForm":[{"contentType":"text/plain","url":"Binary/b0"}]}`
		// b3 names b4, which an HIV-labelled DocumentReference links;
		// nothing links b3: it is placed where b4 is.
		d4 = `{"resourceType":"DocumentReference","id":"d4","meta":{"security":[` + hiv + `]},"status":"current","subject":{"reference":"Patient/p"},"content":[{"attachment":{"contentType":"text/plain","url":"Binary/b4"}}]}`
		b4 = `{"resourceType":"Binary","id":"b4","contentType":"text/plain","data":"SElWIHBvc2l0aXZl"}`
		b3 = `{"resourceType":"Binary","id":"b3","securityContext":{"reference":"Binary/b4"},"contentType":"text/plain","data":"SElWIHBvc2l0aXZl"}`
	)
	t.Run("tenant-level", func(t *testing.T) {
		// b5 names b6, which a DocumentReference of no patient
		// (tenant-level) links: b5, linked by nothing, is not made
		// tenant-level by it.
		q := `{"resourceType":"DocumentReference","id":"q","status":"current","content":[{"attachment":{"contentType":"text/plain","url":"Binary/b6"}}]}`
		b6 := `{"resourceType":"Binary","id":"b6","contentType":"text/plain","data":"bm90ZQ=="}`
		b5 := `{"resourceType":"Binary","id":"b5","securityContext":{"reference":"Binary/b6"},"contentType":"text/plain","data":"SElWIHBvc2l0aXZl"}`
		p := filepath.Join(t.TempDir(), "Mixed.ndjson")
		if err := os.WriteFile(p, []byte(strings.Join([]string{q, b6, b5}, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		items, err := readAll(t, p)
		if !errors.Is(err, ErrCompartment) {
			t.Fatalf("err = %v (%d items), want b5 refused (ErrCompartment)", err, len(items))
		}
	})
	for name, lines := range map[string][]string{
		"in order":  {pat, d1, b1, b0, r0, d4, b4, b3},
		"reversed":  {pat, b3, b4, d4, r0, b0, b1, d1},
		"interlace": {pat, b0, r0, b3, b1, d1, b4, d4},
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "Mixed.ndjson")
			if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			items := mustReadAll(t, p)
			for _, id := range []string{"b0", "b1", "b3", "b4"} {
				if it := find(t, items, "Binary", id); !slices.Contains(it.Sensitivity, "hiv") || it.Patient != "p" {
					t.Errorf("Binary %s: patient %q labels %v, want p with hiv", id, it.Patient, it.Sensitivity)
				}
			}
		})
	}
}

// The pass for the resources Binaries' securityContexts name reads only
// the files that may hold them: in a Bulk export, one Binary naming a
// DocumentReference made it decode every resource of every file a third
// time (an import of 10,000 resources took 60% longer, with 85% more
// allocations). Found reviewing probe-import3 (h-review21).
func TestSecurityContextPassReadsOnlyItsTypes(t *testing.T) {
	d1, b1 := ctxDoc, ctxBinary
	dir := t.TempDir()
	var obs []string
	for i := range 50 {
		obs = append(obs, `{"resourceType":"Observation","id":"o`+itoa(i)+`","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/p"}}`)
	}
	for name, lines := range map[string][]string{
		"Patient.ndjson": {`{"resourceType":"Patient","id":"p"}`}, "DocumentReference.ndjson": {d1},
		"Binary.ndjson": {b1}, "Observation.ndjson": obs,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var items []Item
	rd := readPasses(t, dir, func(it Item) error { items = append(items, it); return nil })
	if it := find(t, items, "Binary", "b1"); !slices.Contains(it.Sensitivity, "hiv") {
		t.Errorf("b1 labels %v, want hiv", it.Sensitivity)
	}
	if rd.ctxDecoded != 1 {
		t.Errorf("the securityContext pass decoded %d resources, want 1 (d1)", rd.ctxDecoded)
	}
}

// ctxDoc is DocumentReference d1 labelled HIV, and ctxBinary the
// Binary b1 whose securityContext names it (a third pass reads d1).
const (
	ctxDoc    = `{"resourceType":"DocumentReference","id":"d1","meta":{"security":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"HIV"}]},"status":"current","subject":{"reference":"Patient/p"},"content":[{"attachment":{"contentType":"text/plain","url":"https://elsewhere.example/doc/1"}}]}`
	ctxBinary = `{"resourceType":"Binary","id":"b1","securityContext":{"reference":"DocumentReference/d1"},"contentType":"text/plain","data":"SElWIHBvc2l0aXZl"}`
)

// readPasses reads the input at dir as Read does (its passes), yielding
// to yield, and returns the reader for its counters; a problem fails t.
func readPasses(t *testing.T, dir string, yield func(Item) error) *reader {
	t.Helper()
	f, err := Detect(dir)
	if err != nil {
		t.Fatal(err)
	}
	srcs, err := sources(dir, f, false)
	if err != nil {
		t.Fatal(err)
	}
	rd := &reader{ctx: t.Context(), opts: Options{Link: testLink}, log: slog.New(slog.DiscardHandler), idx: newIndex(), seen: map[string]bool{}, yield: yield}
	if err := rd.passes(srcs); err != nil || len(rd.problems) > 0 {
		t.Fatalf("passes: %v %v", err, rd.problems)
	}
	return rd
}
