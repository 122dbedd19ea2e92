package store

import (
	"path/filepath"
	"strings"
	"testing"
)

// An attachment's media type parameters other than charset are the
// input's words: "application/pdf; name=Evelyn_Marsh_HIV_result.pdf" (a
// file name, MIME's name and filename parameters) was stored as the
// attachment's MIME type and shown in every list's title, description and
// mimeType ('Attachment of a DocumentReference (application/pdf;
// name=Evelyn_Marsh_HIV_result.pdf)'), where custos puts no content.
// Found by probe-import3 listing an imported DocumentReference through
// custos serve. The stored type keeps only a charset whose value is a
// registered charset name.
func TestAttachmentMediaTypeKeepsNoParameterButCharset(t *testing.T) {
	pdf := []byte("%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF")
	for _, tc := range []struct {
		declared, want string
		body           []byte
	}{
		{"application/pdf; name=Evelyn_Marsh_HIV_result.pdf", "application/pdf", pdf},
		{`text/plain; charset=utf-8; filename="Evelyn Marsh 1961-02-03.txt"`, "text/plain; charset=utf-8", []byte("note")},
		{`text/plain; name="Evelyn Marsh"; charset=UTF-8`, "text/plain; charset=UTF-8", []byte("note")},
		{"application/octet-stream; name=EvelynMarsh.bin", "application/octet-stream", []byte{0, 1, 2}},
		{"application/xml; charset=EvelynMarsh", "application/xml", []byte("<a/>")},
		{"application/xml; charset=ISO-8859-1", "application/xml; charset=ISO-8859-1", []byte("<a/>")},
		{"application/fhir+json; fhirVersion=4.0; name=EvelynMarsh", "application/fhir+json", []byte(`{"resourceType":"Patient"}`)},
		{"text/plain", "text/plain", []byte("note")},
	} {
		got, err := CheckAttachment(tc.declared, tc.body)
		if err != nil || got != tc.want {
			t.Errorf("CheckAttachment(%q) = %q, %v, want %q", tc.declared, got, err, tc.want)
		}
	}

	path := filepath.Join(t.TempDir(), "catalog.db")
	es := sampleEntries()
	es[4].MIMEType = "application/pdf; name=Evelyn_Marsh_HIV_result.pdf"
	es[4].Body = pdf
	if _, err := stagedImport(t, path, EntryOptions{}, es...); err != nil {
		t.Fatal(err)
	}
	for _, r := range allResources(t, openRead(t, path)) {
		if r.Labels.Type != "attachment" {
			continue
		}
		for _, field := range []string{r.MIMEType, r.Title, r.Description} {
			if strings.Contains(field, "Evelyn") || strings.Contains(field, "name=") {
				t.Errorf("%s carries the file name: %q", r.URI, field)
			}
		}
		if r.MIMEType != "application/pdf" || r.Title != "Attachment of a DocumentReference (application/pdf)" {
			t.Errorf("attachment type %q title %q", r.MIMEType, r.Title)
		}
	}
}
