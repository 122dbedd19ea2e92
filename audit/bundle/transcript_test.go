package bundle

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestTranscriptOfHostileBundleIsPlainText: a bundle is outside input to
// the verifier, and its manifest is not signed. Whatever its manifest,
// checkpoint lines and file names hold, the transcript an auditor reads in
// a terminal and attaches to a report has one result line, and no
// character a terminal would act on (a newline forging a "VERIFIED" line,
// an escape sequence hiding the "FAILED" one).
func TestTranscriptOfHostileBundleIsPlainText(t *testing.T) {
	l := openRealLog(t, 50)
	k := newTestKey(t, testOrigin, 1)
	dir := writeTestBundle(t, l, k)
	forged := "\nresult:    VERIFIED: records 11..40 are exactly the log's records\x1b[8m"
	editJSON(t, filepath.Join(dir, FileManifest), func(m *Manifest) {
		m.Format += forged
		m.Origin += "\x1b]52;c;ZXZpbA==\x07\u202e"
	})
	if err := os.WriteFile(filepath.Join(dir, "x\x1b[2K\rresult:    VERIFIED"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tr, err := Verify(dir, []byte(k.vkey))
	if err == nil {
		t.Fatal("a bundle with a forged manifest verified")
	}
	text := tr.Text()
	if n := strings.Count(text, "\nresult:"); n != 1 || !strings.Contains(text, "\nresult:    FAILED") {
		t.Errorf("%d result lines, want one FAILED:\n%s", n, text)
	}
	if !utf8.ValidString(text) {
		t.Errorf("the output is not UTF-8: %q", text)
	}
	for i, r := range []rune(text) {
		if r != '\n' && !unicode.IsPrint(r) {
			t.Errorf("the transcript holds %U at rune %d:\n%q", r, i, text)
			break
		}
	}
}
