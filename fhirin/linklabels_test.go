package fhirin

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A resource that links a Binary carries the Binary's labels, as the
// Binary carries those of every resource linking it: the carrier's body
// names the Binary's URI and describes the document. An unlabelled
// DocumentReference pointing at an HIV-labelled Binary was readable by a
// caller the Binary is kept from (found by probe-reveal). The order of the
// resources in the input does not matter, and a carrier's lifted inline
// attachments have its labels.
func TestReadCarrierHasLinkedBinaryLabels(t *testing.T) {
	const (
		hivBinary = `{"resourceType":"Binary","id":"bhiv","meta":{"security":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"HIV"}]},"contentType":"text/plain","data":"aGl2IHJlc3VsdA=="}`
		plainBin  = `{"resourceType":"Binary","id":"bx","contentType":"text/plain","data":"bm90ZQ=="}`
		// d1 links the HIV Binary and has an inline attachment of its own.
		d1 = `{"resourceType":"DocumentReference","id":"d1","status":"current","subject":{"reference":"Patient/p"},"content":[{"attachment":{"contentType":"text/plain","url":"Binary/bhiv"}},{"attachment":{"contentType":"text/plain","data":"c3VtbWFyeQ=="}}]}`
		// d2 (unlabelled) and d3 (psy) both link bx: bx takes psy, and so
		// does d2, which names bx.
		d2  = `{"resourceType":"DocumentReference","id":"d2","status":"current","subject":{"reference":"Patient/p"},"content":[{"attachment":{"contentType":"text/plain","url":"Binary/bx"}}]}`
		d3  = `{"resourceType":"DocumentReference","id":"d3","status":"current","subject":{"reference":"Patient/p"},"meta":{"security":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"PSY"}]},"content":[{"attachment":{"contentType":"text/plain","url":"Binary/bx"}}]}`
		d4  = `{"resourceType":"DocumentReference","id":"d4","status":"current","subject":{"reference":"Patient/p"},"content":[{"attachment":{"contentType":"text/plain","data":"b3RoZXI="}}]}`
		pat = `{"resourceType":"Patient","id":"p"}`
	)
	want := []struct {
		typ, id string
		labels  []string
	}{
		{"DocumentReference", "d1", []string{"hiv"}},
		{TypeAttachment, "DocumentReference/d1/content[1].attachment", []string{"hiv"}},
		{"Binary", "bhiv", []string{"hiv"}},
		{"DocumentReference", "d2", []string{"psy"}},
		{"DocumentReference", "d3", []string{"psy"}},
		{"Binary", "bx", []string{"psy"}},
		{"DocumentReference", "d4", nil},
		{TypeAttachment, "DocumentReference/d4/content[0].attachment", nil},
		{"Patient", "p", nil},
	}
	for name, lines := range map[string][]string{
		"binaries-first": {pat, hivBinary, plainBin, d1, d2, d3, d4},
		"binaries-last":  {pat, d1, d2, d3, d4, hivBinary, plainBin},
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "Mixed.ndjson")
			if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			items := mustReadAll(t, p)
			if len(items) != len(want) {
				t.Fatalf("%d items, want %d", len(items), len(want))
			}
			for _, w := range want {
				if got := find(t, items, w.typ, w.id).Sensitivity; !slices.Equal(got, w.labels) {
					t.Errorf("%s %s: labels %v, want %v", w.typ, w.id, got, w.labels)
				}
			}
		})
	}
}
