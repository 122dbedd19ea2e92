package fhirin_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/fhirin"
)

// ehrNotes are the variants of h-outside5's Epic clinical-note searchset
// (testdata/ehrnotes, made from minimize/testdata/outside5/fhir's
// epic-documentreference-binary-bundle.json and epic-patient.json): each
// holds the DocumentReference, its one Binary note and the Patient, the
// note in a shape Epic and Oracle Health export. For each, the type the
// Binary is stored as and the text an RTF or HTML reader renders from it.
var ehrNotes = []struct {
	file, mimeType, text string
}{
	// RTF whose 8-bit bytes are windows-1252 (\ansicpg1252): kept as they
	// are, under application/rtf (not text/*, which the store keeps as
	// UTF-8): "M\xfcller" is Müller to an RTF reader of the stored bytes.
	{"epic-rtf-cp1252.json", "application/rtf", "M\xfcller-Penhallow \x96 plan"},
	// RTF after a UTF-8 byte order mark or a line break: 7-bit, kept
	// under text/rtf.
	{"epic-rtf-bom.json", "text/rtf", "\xef\xbb\xbf{\\rtf1"},
	{"epic-rtf-linebreak.json", "text/rtf", "\r\n{\\rtf1"},
	// HTML in ISO-8859-1 (WHATWG: windows-1252) or windows-1252 declared
	// only in a meta element: transcoded to UTF-8.
	{"epic-html-meta-charset.json", "text/html; charset=utf-8", "Müller-Penhallow"},
	{"epic-html-http-equiv.json", "text/html; charset=utf-8", "“Feeling better” – Dr. Orla Müller"},
	// A plain sentence under text/html.
	{"epic-html-tagless.json", "text/html", "Discharge summary: "},
}

// TestReadEHRNotes: the clinical notes h-outside5 found refused, which
// failed the whole import: an RTF with windows-1252 bytes ("the text is
// not utf-8 and declares no charset"), an RTF after a byte order mark or
// a line break ("the bytes are text/plain, not text/rtf"), HTML whose
// charset is only in a meta element ("not utf-8") and text/html without a
// tag ("the bytes are text/plain, not text/html"). Each is read, its
// Binary with the type and bytes ehrNotes says.
func TestReadEHRNotes(t *testing.T) {
	link := func(typ, id, patient string) string { return "attachment://demo/attachments/placeholder" }
	for _, n := range ehrNotes {
		var bin *fhirin.Item
		err := fhirin.Read(context.Background(), filepath.Join("testdata", "ehrnotes", n.file), fhirin.Options{Link: link}, func(it fhirin.Item) error {
			if it.Type == "Binary" {
				bin = &it
			}
			return nil
		})
		switch {
		case err != nil:
			t.Errorf("%s: %v", n.file, err)
		case bin == nil:
			t.Errorf("%s: no Binary read", n.file)
		case bin.MIMEType != n.mimeType || !strings.Contains(string(bin.Body), n.text):
			t.Errorf("%s: Binary of type %q, want %q holding %q:\n%q", n.file, bin.MIMEType, n.mimeType, n.text, bin.Body)
		}
	}
}
