package fhirin

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzRead feeds arbitrary bytes to the NDJSON and the JSON (Bundle)
// readers. Read must not panic; it fails with an *Error that quotes none of
// the input (the seeds plant "SECRET"), or yields items that keep the
// invariants: an R4 type, a valid id, JSON bodies, a Patient in its own
// compartment, no inline attachment data left in a carrier.
func FuzzRead(f *testing.F) {
	for _, p := range []string{"testdata/bulk/Observation.000.ndjson", "testdata/bulk/DocumentReference.ndjson",
		"testdata/bulk/Bundle.deleted.ndjson", "testdata/synthea-bundle.json", "../testdata/fhir-corpus/bundle-immunization.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, strings.HasSuffix(p, ".ndjson"))
	}
	f.Add([]byte(`{"resourceType":"Observation","id":"SECRET","subject":{"reference":"Patient/SECRET"},"performer":[{"reference":"Patient/SECRET2"}]}`), true)
	f.Add([]byte(`{"resourceType":"Bundle","type":"transaction","entry":[{"fullUrl":"urn:uuid:SECRET","resource":{"resourceType":"Binary","contentType":"text/plain","data":"U0VDUkVU"}},{"resource":{"resourceType":"DocumentReference","id":"d","content":[{"attachment":{"url":"urn:uuid:SECRET"}}]}}]}`), false)
	f.Add([]byte(`[{"resourceType":"Patient","id":"SECRET"}`), false)
	f.Fuzz(func(t *testing.T, data []byte, ndjson bool) {
		name := "x.json"
		if ndjson {
			name = "x.ndjson"
		}
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var items []Item
		err := Read(t.Context(), p, Options{Link: testLink, MaxLine: 1 << 20}, func(it Item) error {
			items = append(items, it)
			return nil
		})
		if err != nil {
			var fe *Error
			if !errors.As(err, &fe) {
				t.Fatalf("not an *Error: %v", err)
			}
			if bytes.Contains(data, []byte("SECRET")) && strings.Contains(err.Error(), "SECRET") {
				t.Fatalf("the error quotes the input: %v", err)
			}
			return
		}
		for _, it := range items {
			switch {
			case it.Deleted:
				if !r4Types[it.Type] || !validID(it.ID) || it.Body != nil {
					t.Fatalf("bad deleted item %+v", it)
				}
			case it.Type == TypeAttachment, it.Type == "Binary":
				if it.MIMEType == "" {
					t.Fatalf("attachment without a MIME type: %+v", it)
				}
			default:
				if !r4Types[it.Type] || !validID(it.ID) || !json.Valid(it.Body) || it.MIMEType != FHIRJSON {
					t.Fatalf("bad resource item %s %q", it.Type, it.ID)
				}
				if it.Type == "Patient" && it.Patient != it.ID {
					t.Fatalf("a Patient outside its own compartment")
				}
				if _, lifts := attachmentPaths[it.Type]; lifts && bytes.Contains(it.Body, []byte(`"data"`)) {
					var r resource
					if json.Unmarshal(it.Body, &r.m) == nil {
						r.typ = it.Type
						r.eachAttachment(func(att map[string]any, _ string) error {
							if _, ok := att["data"]; ok {
								t.Fatalf("%s keeps inline attachment data", it.Type)
							}
							return nil
						})
					}
				}
			}
		}
	})
}

// FuzzLoneSurrogate holds loneSurrogate to encoding/json's decoding: a
// JSON string it flags decodes with U+FFFD (no false alarm on a pair, an
// escaped backslash, a non-surrogate escape); one that decodes with U+FFFD
// that neither a literal U+FFFD nor a \ufffd escape wrote is flagged (no
// lone surrogate missed); what json.Marshal writes is never flagged.
func FuzzLoneSurrogate(f *testing.F) {
	for _, s := range []string{`\ud83d\ude00`, `\udc00`, `a\ud800`, `\ud800\u0041`, `\\ud800`, `\\\ud800`, `\ufffd`, `x\"\ud800\udc00`, `\uD83D\uDE00\uDBFF`, `\u00e9\/`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if m, err := json.Marshal(s); err == nil && loneSurrogate(m) >= 0 {
			t.Fatalf("json.Marshal(%q) = %s flagged", s, m)
		}
		raw := []byte(`"` + s + `"`)
		if !json.Valid(raw) || !utf8.Valid(raw) {
			return
		}
		var d string
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		flagged := loneSurrogate(raw) >= 0
		replaced := strings.ContainsRune(d, utf8.RuneError)
		written := strings.ContainsRune(s, utf8.RuneError) || strings.Contains(strings.ToLower(s), `\ufffd`)
		switch {
		case flagged && !replaced:
			t.Fatalf("%s flagged, but decodes to %q", raw, d)
		case replaced && !written && !flagged:
			t.Fatalf("%s decodes to %q, not flagged", raw, d)
		}
	})
}
