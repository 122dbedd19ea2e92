package fhirin

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/store"
)

// attachmentSamples are attachment bytes of the kinds hospitals send, for
// the agreement test and the fuzz seeds.
var attachmentSamples = map[string][]byte{
	"pdf":         []byte("%PDF-1.4\n1 0 obj\n<<>>\nendobj\n%%EOF\n"),
	"pdf-bom":     []byte("\xef\xbb\xbf%PDF-1.4\n%%EOF\n"),
	"pdf-space":   []byte("  %PDF-1.4\n%%EOF\n"),
	"png":         []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"),
	"jpeg":        []byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xd9"),
	"gif":         []byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;"),
	"text":        []byte("Patient seen today.\n"),
	"text-utf8":   []byte("Café au lait spots, 2 cm.\n"),
	"text-latin1": []byte("Caf\xe9 au lait spots, 2 cm.\n"),
	"text-cp1252": []byte("Fee \x80 20, \x93quoted\x94\n"),
	"cp1252-hole": []byte("undefined \x81 byte\n"),
	"utf16":       []byte("\xff\xfeh\x00i\x00"),
	"html":        []byte("<html><body>x</body></html>"),
	"xml":         []byte(`<?xml version="1.0" encoding="UTF-8"?><ClinicalDocument xmlns="urn:hl7-org:v3"/>`),
	"xml-nodecl":  []byte("<!-- C-CDA -->\n<ClinicalDocument xmlns=\"urn:hl7-org:v3\"/>\n"),
	"json":        []byte(`{"resourceType":"Observation","status":"final"}`),
	"bad-json":    []byte(`{"resourceType":`),
	"hl7v2":       []byte("MSH|^~\\&|EPIC|\r"),
	"binary":      {0, 1, 2, 3, 0xff, 0xfe},
	// RTF as Epic and Oracle Health export it: 8-bit bytes in the code
	// page it declares (\ansicpg1252), after a byte order mark, after
	// whitespace.
	"rtf":            []byte("{\\rtf1\\ansi\\deff0 Progress note\\par}"),
	"rtf-cp1252":     []byte("{\\rtf1\\ansi\\ansicpg1252\\deff0 Dr. M\xfcller \x96 progress note\\par}"),
	"rtf-bom":        []byte("\xef\xbb\xbf{\\rtf1\\ansi Progress note\\par}"),
	"rtf-space":      []byte("\r\n \t{\\rtf1\\ansi Progress note\\par}"),
	"rtf-bom-cp1252": []byte("\xef\xbb\xbf\r\n{\\rtf1\\ansi\\ansicpg1252 M\xfcller\\par}"),
	// HTML declaring its charset only in the document.
	"html-meta-latin1":  []byte(`<html><head><meta charset="iso-8859-1"></head><body>M` + "\xfc" + `ller</body></html>`),
	"html-equiv-cp1252": []byte(`<html><head><meta http-equiv="Content-Type" content="text/html; charset=windows-1252"></head><body>` + "\x93ok\x94" + `</body></html>`),
	"html-undeclared":   []byte("<html><body>M\xfcller</body></html>"),
	"html-meta-utf8":    []byte(`<html><head><meta charset="utf-8"></head><body>M` + "\xfc" + `ller</body></html>`),
	"html-meta-sjis":    []byte(`<html><head><meta charset="x-sjis"></head><body>` + "\x82\xa0" + `</body></html>`),
	"html-meta-hole":    []byte(`<html><head><meta charset="windows-1252"></head><body>` + "\x81" + `</body></html>`),
	"html-meta-valid":   []byte(`<html><head><meta charset="iso-8859-1"></head><body>Müller</body></html>`),
	"html-utf16":        []byte("\xff\xfe<\x00p\x00>\x00"),
	"elf":               []byte("\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x3e\x00"),
	"csv-like":          []byte("Temp 37.2, BP 120/80\nPulse 72, RR 16\nSpO2 98, pain 0\n"),
	"empty":             {},
}

// attachmentTypes are declared contentTypes of the same kinds.
var attachmentTypes = []string{
	"application/pdf", "image/png", "image/jpeg", "image/jpg", "image/gif", "application/octet-stream",
	"text/plain", "text/plain; charset=utf-8", "text/plain; charset=UTF-8", "text/plain; charset=us-ascii",
	"text/plain; charset=ISO-8859-1", "text/plain; charset=latin1", "text/plain; charset=windows-1252",
	"text/plain; charset=shift_jis", "text/html", "text/html; charset=iso-8859-1", "text/xml", "text/csv",
	"application/xml", "application/hl7-v3+xml", "application/cda+xml", "application/json", "application/fhir+json",
	"application/hl7-v2", "application/x-custom", "Text/Plain", "not a type", "",
	"application/pdf; name=Evelyn_Marsh.pdf", `text/plain; charset=utf-8; filename="Evelyn Marsh.txt"`, "application/xml; charset=Evelyn",
	"text/rtf", "application/rtf", "text/rtf; charset=windows-1252", "text/rtf; charset=shift_jis", "text/html; charset=utf-8",
}

// checkAgreement fails t if the reader accepts an attachment that the
// store would refuse, or gives it another media type than the store.
func checkAgreement(t *testing.T, declared string, data []byte) {
	t.Helper()
	out, mt, err := attachmentBytes(declared, data)
	if err != nil {
		return
	}
	got, serr := store.CheckAttachment(mt, out)
	if serr != nil || got != mt {
		t.Errorf("%q with %q: the reader accepts it as %q, the store says %q, %v", declared, data, mt, got, serr)
	}
}

// TestAttachmentAgreesWithStore: what the reader accepts as an attachment
// the store accepts too, as the same media type. An outside probe found
// them disagreeing (PDF bytes declared application/octet-stream, text in
// ISO-8859-1): the reader let the attachment through and the store refused
// it at the end of the import, without the FHIR path.
func TestAttachmentAgreesWithStore(t *testing.T) {
	for _, declared := range attachmentTypes {
		for _, data := range attachmentSamples {
			checkAgreement(t, declared, data)
		}
	}
}

func FuzzAttachmentAgreesWithStore(f *testing.F) {
	for _, declared := range attachmentTypes {
		for _, data := range attachmentSamples {
			f.Add(declared, data)
		}
	}
	f.Fuzz(checkAgreement)
}

// TestAttachmentBytes pins what the reader does with the types and
// charsets the probe sent: any bytes under application/octet-stream;
// ISO-8859-1 and windows-1252 text transcoded to UTF-8; other charsets,
// and text that is not UTF-8 and names no charset, refused; image/jpg read
// as image/jpeg; +json checked as JSON.
func TestAttachmentBytes(t *testing.T) {
	s := attachmentSamples
	checkAttachmentCases(t, []attachmentCase{
		{"application/octet-stream", s["pdf"], "application/octet-stream", "", nil},
		{"application/octet-stream", s["binary"], "application/octet-stream", "", nil},
		{"text/plain; charset=ISO-8859-1", s["text-latin1"], "text/plain; charset=utf-8", "Café au lait spots, 2 cm.\n", nil},
		{"text/plain; charset=latin1", s["text-latin1"], "text/plain; charset=utf-8", "Café au lait spots, 2 cm.\n", nil},
		{"text/plain; charset=windows-1252", s["text-cp1252"], "text/plain; charset=utf-8", "Fee € 20, “quoted”\n", nil},
		{"text/plain; charset=windows-1252", s["cp1252-hole"], "", "", errNotInCharset},
		// ISO-8859-1 labels read as windows-1252 (WHATWG), as browsers and
		// the HTML <meta> path read them: its quotes and euro sign, not C1
		// controls; its five undefined bytes (0x9D: a terminal's OSC) refused.
		{"text/plain; charset=ISO-8859-1", s["text-cp1252"], "text/plain; charset=utf-8", "Fee € 20, “quoted”\n", nil},
		{"text/html; charset=latin1", s["text-cp1252"], "text/html; charset=utf-8", "Fee € 20, “quoted”\n", nil},
		{"text/plain; charset=iso-8859-1", s["cp1252-hole"], "", "", errNotInCharset},
		{"text/plain; charset=shift_jis", s["text"], "", "", errCharset},
		{"text/plain; charset=utf-16", s["utf16"], "", "", errCharset},
		{"text/plain", s["text-latin1"], "", "", errNotUTF8Undeclared},
		{"text/plain; charset=utf-8", s["text-latin1"], "", "", errNotUTF8},
		{"text/plain; charset=UTF-8", s["text-utf8"], "text/plain; charset=UTF-8", "", nil},
		{"image/jpg", s["jpeg"], "image/jpeg", "", nil},
		{"image/jpg", s["png"], "", "", nil},
		{"application/fhir+json", s["json"], "application/fhir+json", "", nil},
		{"application/fhir+json", s["bad-json"], "", "", errNotJSON},
		{"application/json", s["bad-json"], "", "", errNotJSON},
		{"application/pdf", s["pdf-bom"], "application/pdf", "", nil},
		// A file name in a parameter is not kept (store.ServedMediaType):
		// the type is listed in titles and descriptions.
		{"application/pdf; name=Evelyn_Marsh.pdf", s["pdf"], "application/pdf", "", nil},
		{`text/plain; charset=ISO-8859-1; filename="Evelyn Marsh.txt"`, s["text-latin1"], "text/plain; charset=utf-8", "Café au lait spots, 2 cm.\n", nil},
		{"application/xml; charset=Evelyn", s["xml"], "application/xml", "", nil},
	}, "shift_jis")
}

// attachmentCase is what attachmentBytes does with declared and data:
// accepts it as wantType with the bytes wantData ("" = the input), or
// refuses it (wantType "") with wantErr (nil = any error).
type attachmentCase struct {
	declared string
	data     []byte
	wantType string
	wantData string
	wantErr  error
}

// checkAttachmentCases runs attachmentBytes on every case, and fails t
// when an error holds quoted (words of the input no error may quote).
func checkAttachmentCases(t *testing.T, cases []attachmentCase, quoted string) {
	t.Helper()
	for _, tc := range cases {
		out, mt, err := attachmentBytes(tc.declared, tc.data)
		want := tc.wantData
		if want == "" {
			want = string(tc.data)
		}
		switch {
		case tc.wantType == "" && err == nil:
			t.Errorf("%q with %q: accepted as %q, want a refusal", tc.declared, tc.data, mt)
		case tc.wantType == "" && tc.wantErr != nil && !errors.Is(err, tc.wantErr):
			t.Errorf("%q with %q: %v, want %v", tc.declared, tc.data, err, tc.wantErr)
		case tc.wantType != "" && (err != nil || mt != tc.wantType || string(out) != want):
			t.Errorf("%q with %q: %q %q %v, want %q %q", tc.declared, tc.data, mt, out, err, tc.wantType, want)
		}
		if err != nil && strings.Contains(err.Error(), quoted) {
			t.Errorf("the error quotes the input (%q): %v", quoted, err)
		}
	}
}

// TestAttachmentRTF: an RTF is never rewritten. Its 8-bit bytes are
// characters of the code page it declares in-band (\ansicpg1252), which
// the reader refused as text that is not UTF-8 (declared text/rtf), or
// transcoded as a MIME charset (text/rtf; charset=windows-1252), after
// which an RTF reader renders "Müller" as "MÃ¼ller". Such an RTF is kept
// byte for byte under application/rtf (not text/*, which the store keeps
// as UTF-8); a 7-bit one stays text/rtf. An RTF after a byte order mark or
// whitespace, which mimetype reads as text/plain, is RTF. Bytes that are
// not RTF are still refused under either RTF type.
func TestAttachmentRTF(t *testing.T) {
	s := attachmentSamples
	checkAttachmentCases(t, []attachmentCase{
		{"text/rtf", s["rtf-cp1252"], "application/rtf", "", nil},
		{"text/rtf; charset=windows-1252", s["rtf-cp1252"], "application/rtf", "", nil},
		{"text/rtf; charset=utf-8", s["rtf-cp1252"], "application/rtf", "", nil},
		{"application/rtf", s["rtf-cp1252"], "application/rtf", "", nil},
		{"text/rtf", s["rtf"], "text/rtf", "", nil},
		{"text/rtf; charset=windows-1252", s["rtf"], "text/rtf; charset=utf-8", "", nil},
		{"text/rtf", s["rtf-bom"], "text/rtf", "", nil},
		{"application/rtf", s["rtf-bom"], "application/rtf", "", nil},
		{"text/rtf", s["rtf-space"], "text/rtf", "", nil},
		{"text/rtf", s["rtf-bom-cp1252"], "application/rtf", "", nil},
		{"text/rtf", s["pdf"], "", "", nil},
		{"text/rtf", s["text"], "", "", nil},
		{"text/rtf", s["text-cp1252"], "", "", errNotUTF8Undeclared},
		{"application/rtf", s["pdf"], "", "", nil},
		{"application/rtf", s["binary"], "", "", nil},
		{"text/rtf", []byte("rtf\n{\\rtf1 x}"), "", "", nil},
	}, "Müller")
}

// TestAttachmentHTMLEncoding: HTML whose contentType names no charset is
// read in the encoding the document declares (a byte order mark, a
// <meta charset> or <meta http-equiv="Content-Type">: WHATWG's prescan,
// golang.org/x/net/html/charset), as a browser reads it; the reader
// refused it when its bytes were not UTF-8 ("the text is not utf-8 and
// declares no charset"). windows-1252 (which WHATWG's iso-8859-1 names)
// is transcoded to UTF-8, and the stored type says so. A document that
// declares nothing is not guessed; one that declares UTF-8 must be UTF-8;
// any other encoding is refused, naming it by WHATWG's name (the label
// x-sjis is Shift_JIS), never the document's words. UTF-8 bytes are kept
// as before, whatever the document says. Text without a tag is an HTML
// body (the reader refused it: "the bytes are text/plain, not
// text/html"); bytes that are not text are not.
func TestAttachmentHTMLEncoding(t *testing.T) {
	s := attachmentSamples
	checkAttachmentCases(t, []attachmentCase{
		{"text/html", s["html-meta-latin1"], "text/html; charset=utf-8", `<html><head><meta charset="iso-8859-1"></head><body>Müller</body></html>`, nil},
		{"text/html", s["html-equiv-cp1252"], "text/html; charset=utf-8", `<html><head><meta http-equiv="Content-Type" content="text/html; charset=windows-1252"></head><body>“ok”</body></html>`, nil},
		{"text/html", s["html-undeclared"], "", "", errNotUTF8Undeclared},
		{"text/html", s["html-meta-utf8"], "", "", errNotUTF8},
		{"text/html", s["html-meta-sjis"], "", "", encodingError("shift_jis")},
		{"text/html", s["html-utf16"], "", "", encodingError("utf-16le")},
		{"text/html", s["html-meta-hole"], "", "", errNotInCharset},
		{"text/html", s["html-meta-valid"], "text/html", "", nil},
		{"text/html; charset=utf-8", s["html-meta-latin1"], "", "", errNotUTF8},
		{"text/html; charset=iso-8859-1", s["html-meta-latin1"], "text/html; charset=utf-8", `<html><head><meta charset="iso-8859-1"></head><body>Müller</body></html>`, nil},
		{"text/plain", s["html-meta-latin1"], "", "", errNotUTF8Undeclared},
		{"text/html", s["text"], "text/html", "", nil},
		{"text/html", s["csv-like"], "text/html", "", nil},
		{"text/html", s["pdf"], "", "", nil},
		{"text/html", s["elf"], "", "", nil},
		{"text/html", s["binary"], "", "", nil},
	}, "x-sjis")
	if _, _, err := attachmentBytes("text/html", s["html-meta-sjis"]); err == nil || !strings.Contains(err.Error(), "shift_jis") {
		t.Errorf("Shift_JIS HTML: %v, want an error naming the encoding", err)
	}
}

// ValidBase64 (streaming, for callers that stage attachments) agrees with
// decodeBase64, the reader's decoding, on every input: whitespace FHIR
// allows, padding, stray characters, truncation.
func TestValidBase64AgreesWithDecode(t *testing.T) {
	ins := []string{"", "JVBERg==", "JVBE\nRg==", " JVBE Rg== \r\n", "JVBERg=", "JVBERg", "JVBER*g==", "JVBERg===", "=", "aGk", "aGk=", "aGk=\t", "aG\u00e9k=", "YWJj\nZGVm\n", "YWJjZGVm====", "Zg==Zg=="}
	for i := range 64 {
		b := make([]byte, i)
		for j := range b {
			b[j] = byte(j * 37)
		}
		enc := base64.StdEncoding.EncodeToString(b)
		ins = append(ins, enc, enc+"\n", strings.TrimRight(enc, "="))
		if len(enc) > 2 {
			ins = append(ins, enc[:len(enc)-1], enc[1:])
		}
	}
	for _, s := range ins {
		_, err := decodeBase64(s)
		if got := ValidBase64(s); got != (err == nil) {
			t.Errorf("ValidBase64(%q) = %v, decodeBase64 error %v", s, got, err)
		}
	}
}

// TestAttachmentXMLWithoutDeclaration: an XML document needs no XML
// declaration (XML 1.0 section 2.8: the prolog is optional), and a C-CDA
// DocumentReference often carries one without it, or with a comment first,
// under application/xml or text/xml. mimetype detects XML only by a
// leading "<?xml", and the reader refused such a document ("the bytes are
// text/plain, not application/xml"; a leading comment, "text/html"), so
// the whole import failed. Bytes declared as an XML type (application/xml,
// text/xml, any +xml, RFC 7303) that the library does not detect as XML
// are now checked as XML with encoding/xml: well-formed with one root
// element is accepted, anything else refused, under every XML type (a
// type the library does not know, application/cda+xml, took any text).
func TestAttachmentXMLWithoutDeclaration(t *testing.T) {
	ccda := `<ClinicalDocument xmlns="urn:hl7-org:v3"><recordTarget><patientRole><id extension="1" root="2.16.840.1.113883.19.5"/></patientRole></recordTarget></ClinicalDocument>`
	for _, tc := range []struct {
		declared, data, wantType string // wantType "" = refused
	}{
		{"application/xml", ccda, "application/xml"},
		{"text/xml", "\n  " + ccda + "\n", "text/xml"},
		{"application/xml", "<!-- C-CDA R2.1 -->\n" + ccda, "application/xml"},
		{"application/hl7-v3+xml", ccda, "application/hl7-v3+xml"},
		{"application/cda+xml", ccda, "application/cda+xml"},
		{"application/xml", `<?xml version="1.0" encoding="UTF-8"?>` + ccda, "application/xml"},
		{"application/xml", "Patient seen today.\n", ""},
		{"application/cda+xml", "Patient seen today.\n", ""},
		{"text/xml", "<a><b></a>", ""},
		{"application/xml", "<a/><b/>", ""},
		{"application/xml", "<a/>trailing text", ""},
		{"application/xml", "", ""},
	} {
		_, mt, err := attachmentBytes(tc.declared, []byte(tc.data))
		switch {
		case tc.wantType == "" && err == nil:
			t.Errorf("%q with %q: accepted as %q, want a refusal", tc.declared, tc.data, mt)
		case tc.wantType != "" && (err != nil || mt != tc.wantType):
			t.Errorf("%q with %q: %q %v, want %q", tc.declared, tc.data, mt, err, tc.wantType)
		}
		if err != nil && strings.Contains(err.Error(), "Patient") {
			t.Errorf("the error quotes the bytes: %v", err)
		}
	}
}
