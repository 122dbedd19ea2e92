package audit

import (
	"bytes"
	"context"
	"encoding/csv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestCSVExportNeutralizesFormulas(t *testing.T) {
	l, _ := mustOpen(t, Options{Node: "n"})
	evil := "=HYPERLINK(\"http://x\",\"y\")"
	if _, err := l.Append(context.Background(), Entry{Action: "resources/read", Outcome: OutcomeDeny, Reason: "-1+1", Principal: Principal{Sub: evil, ClientID: "@c"}, Keys: []string{"=cmd|' /C calc'!A0", "+x"}}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := l.Export(context.Background(), &buf, FormatCSV, Filter{}); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	row := rows[1]
	for name, want := range map[string]string{"sub": "'" + evil, "reason": "'-1+1", "client_id": "'@c", "action": "resources/read", "keys": "'+x;'=cmd|' /C calc'!A0"} {
		if got := row[col[name]]; got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}

// TestCSVSafe pins the cells CSVSafe and CSVList defuse: every formula
// start, in the first element of a list and after a ";".
func TestCSVSafe(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"=1+2", "'=1+2"}, {"+1", "'+1"}, {"-1", "'-1"}, {"@SUM(A1)", "'@SUM(A1)"},
		{"\tx", "'\tx"}, {"\rx", "'\rx"}, {"\nx", "'\nx"}, {"\x00x", "'\x00x"},
		{"＝1+2", "'＝1+2"}, {"＋1", "'＋1"}, {"－1", "'－1"}, {"＠x", "'＠x"},
		{"a=1", "a=1"}, {"", ""}, {"clinician", "clinician"}, {"'already", "'already"},
		{"a;=1", "a;'=1"}, {"a;b;@x", "a;b;'@x"}, {"a\t+1", "a\t'+1"}, {"a;\t-1", "a;'\t'-1"}, {"a;", "a;"}, {";", ";"},
	} {
		if got := CSVSafe(tc.in); got != tc.want {
			t.Errorf("CSVSafe(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got, want := CSVList([]string{"clinician", "=1+2", "@x", "ok"}), "clinician;'=1+2;'@x;ok"; got != want {
		t.Errorf("CSVList = %q, want %q", got, want)
	}
}

// TestCSVExportNeutralizesFormulasAfterSeparators: a spreadsheet that
// splits cells at ";" (the list separator of many locales) or at a tab sees
// a new cell after each of them, in any cell, not only in the list cells:
// a principal, a client id or a reason holding ";=HYPERLINK(…)" must not
// become a formula there either. The export is read back as such a
// spreadsheet would and every cell checked.
func TestCSVExportNeutralizesFormulasAfterSeparators(t *testing.T) {
	l, _ := mustOpen(t, Options{Node: "n"})
	evil := []string{";=HYPERLINK(\"http://x\",\"y\")", "a;+1", "b;-2;@SUM(A1)", "c\t=1+2", "d;\t=3", "e;＝4"}
	for _, e := range evil {
		if _, err := l.Append(context.Background(), Entry{Action: "resources/read", Outcome: OutcomeDeny, Reason: "policy_error " + e,
			Principal: Principal{Sub: "dr" + e, Roles: []string{"r" + e}, ClientID: "cl" + e}, PurposeOfUse: "TREAT" + e, Session: "s" + e, Source: "src" + e,
			URIs: []string{"u" + e}, DecisionID: "d" + e, PolicyRevision: "p" + e, Obligations: []string{"o" + e}}); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := l.Export(context.Background(), &buf, FormatCSV, Filter{}); err != nil {
		t.Fatal(err)
	}
	for _, sep := range []rune{',', ';', '\t'} {
		r := csv.NewReader(bytes.NewReader(buf.Bytes()))
		r.Comma, r.LazyQuotes, r.FieldsPerRecord = sep, true, -1
		rows, err := r.ReadAll()
		if err != nil {
			t.Fatalf("separator %q: %v", sep, err)
		}
		for i, row := range rows {
			for _, cell := range row {
				if first, _ := utf8.DecodeRuneInString(cell); cell != "" && strings.ContainsRune("=+-@\t\r\n\x00＝＋－＠", first) {
					t.Errorf("separator %q, row %d: cell %q would be evaluated", sep, i, cell)
				}
			}
		}
	}
}

// escaped is a character and the text of the escape a CSV cell writes it
// as.
type escaped struct {
	r    rune
	text string
}

// formatControls are the bidirectional controls and invisible format
// characters a CSV cell must not hold as they are: with the text of the
// escape each is written as.
var formatControls = []escaped{
	{'\u202a', `\u202a`}, {'\u202b', `\u202b`}, {'\u202c', `\u202c`}, {'\u202d', `\u202d`}, {'\u202e', `\u202e`},
	{'\u2066', `\u2066`}, {'\u2067', `\u2067`}, {'\u2068', `\u2068`}, {'\u2069', `\u2069`},
	{'\u200e', `\u200e`}, {'\u200f', `\u200f`}, {'\u061c', `\u061c`},
	{'\u200b', `\u200b`}, {'\ufeff', `\ufeff`}, {'\u2060', `\u2060`}, {'\U000e0041', `\U000e0041`},
}

// TestCSVExportShowsFormatControls: a bidi control or another invisible
// format character in any cell (a client id holding a right-to-left
// override displays reversed in a spreadsheet: who read what, spoofed) is
// written as the text of its escape, \u202e, so that the cell shows it
// and what was stored can be read back; the JSONL export keeps the exact
// bytes. Until h-audit12 the CSV kept each as stored. The CSV still
// parses, a header and one row per record.
func TestCSVExportShowsFormatControls(t *testing.T) {
	rows, col, jl := exportEach(t, formatControls)
	for i, c := range formatControls {
		row := rows[i+1]
		for _, cell := range row {
			if strings.ContainsFunc(cell, func(r rune) bool { return unicode.Is(unicode.Cf, r) }) {
				t.Errorf("U+%04X: cell %q holds a format character as it is", c.r, cell)
			}
		}
		for name, want := range map[string]string{
			"reason": "by=" + c.text + "ops", "sub": "dr" + c.text, "roles": c.text + "clinician;nurse",
			"client_id": "claude" + c.text + "desktop", "session": c.text, "uris": "u" + c.text, "patients": c.text + "p",
		} {
			if got := row[col[name]]; got != want {
				t.Errorf("U+%04X: %s = %q, want %q", c.r, name, got, want)
			}
		}
	}
	for _, c := range formatControls {
		if !strings.Contains(string(jl), "claude"+string(c.r)+"desktop") {
			t.Errorf("U+%04X: the JSONL export does not keep the stored bytes", c.r)
		}
	}
}

// TestCSVVisible pins CSVVisible and CSVCell: format characters escaped,
// everything else as it is, formula starts still defused after an escape.
func TestCSVVisible(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""}, {"clinician", "clinician"}, {"naïve ñ 日本", "naïve ñ 日本"}, {`a\u202eb`, `a\u202eb`},
		{"a\u202eb", `a\u202eb`}, {"\u202e=1+2", `\u202e=1+2`}, {"x;\u2066@y", `x;\u2066@y`},
		{"=\u200f1", `'=\u200f1`}, {"a;=b\u202c", `a;'=b\u202c`}, {"\t\u061c", `'` + "\t" + `\u061c`},
		{"a\u2028b", `a\u2028b`}, {"\x1b[2Jx", `\x1b[2Jx`}, {"\u009b31m", `\u009b31m`}, {"\x00=1", `\x00=1`},
		{"a\nb\tc\rd", "a\nb\tc\rd"}, {"\u00a0x", "\u00a0x"},
	} {
		if got := CSVCell(tc.in); got != tc.want {
			t.Errorf("CSVCell(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// lineControls are the control characters (C0 but tab, line feed and
// carriage return; DEL; C1) and the line and paragraph separators a CSV
// cell must not hold as they are, with the text of the escape each is
// written as: an escape sequence (ESC, or C1's CSI U+009B) rewrites the
// screen of whoever reads the file in a terminal, and a vertical tab, a
// form feed, U+0085 (NEL), U+2028 or U+2029 breaks the line in editors
// and line splitters (Python's str.splitlines) though the cell is not
// quoted for it: a row forged inside a reason or a client id.
var lineControls = []escaped{
	{'\x00', `\x00`}, {'\x01', `\x01`}, {'\x1b', `\x1b`}, {'\v', `\v`}, {'\f', `\f`}, {'\x1c', `\x1c`}, {'\x7f', `\x7f`},
	{'\u0085', `\u0085`}, {'\u009b', `\u009b`}, {'\u2028', `\u2028`}, {'\u2029', `\u2029`},
}

// TestCSVExportShowsLineControls: a control character or a line or
// paragraph separator in any cell is written as the text of its escape,
// as a format character is (TestCSVExportShowsFormatControls), so that no
// cell rewrites a terminal or breaks a line no CSV reader sees; the JSONL
// export keeps the exact bytes. Until h-review48 CSVVisible escaped
// format characters (Cf) only, and each of these was written as stored.
// A tab, a line feed and a carriage return are left to CSVSafe and to the
// CSV quoting (a cell holding a line break is quoted).
func TestCSVExportShowsLineControls(t *testing.T) {
	rows, col, jl := exportEach(t, lineControls)
	for i, row := range rows {
		for _, cell := range row {
			if strings.ContainsFunc(cell, func(r rune) bool { return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' }) {
				t.Errorf("row %d: cell %q holds a control character or a separator as it is", i, cell)
			}
		}
	}
	for i, c := range lineControls {
		row := rows[i+1]
		// A list element is defused (CSVList) before the cell is
		// escaped: one that begins with a NUL keeps its quote.
		elem := ""
		if c.r == 0 {
			elem = "'"
		}
		for name, want := range map[string]string{
			"reason": "by=" + c.text + "ops", "sub": "dr" + c.text, "roles": elem + c.text + "clinician;nurse",
			"client_id": "claude" + c.text + "desktop", "session": c.text, "uris": "u" + c.text, "patients": elem + c.text + "p",
		} {
			if got := row[col[name]]; got != want {
				t.Errorf("U+%04X: %s = %q, want %q", c.r, name, got, want)
			}
		}
	}
	lines := bytes.Split(bytes.TrimSuffix(jl, []byte("\n")), []byte("\n"))
	for i, c := range lineControls {
		rec, err := Decode(lines[i])
		if err != nil || rec.Principal.ClientID != "claude"+string(c.r)+"desktop" {
			t.Errorf("U+%04X: the JSONL export does not keep the stored text (%v)", c.r, err)
		}
	}
}

// exportEach appends, for each character of chars, a record holding it in
// every text field, and returns the CSV export's rows (the header first),
// its columns by name and the JSONL export.
func exportEach(t *testing.T, chars []escaped) (rows [][]string, col map[string]int, jsonl []byte) {
	t.Helper()
	l, _ := mustOpen(t, Options{Node: "n"})
	ctx := context.Background()
	for _, c := range chars {
		s := string(c.r)
		if _, err := l.Append(ctx, Entry{Action: "resources/read", Outcome: OutcomeAllow, Reason: "by=" + s + "ops",
			Principal:    Principal{Sub: "dr" + s, Roles: []string{s + "clinician", "nurse"}, ClientID: "claude" + s + "desktop"},
			PurposeOfUse: "TREAT", Session: s, URIs: []string{"u" + s}, Patients: []string{s + "p"}}); err != nil {
			t.Fatal(err)
		}
	}
	var buf, jl bytes.Buffer
	if _, err := l.Export(ctx, &buf, FormatCSV, Filter{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Export(ctx, &jl, FormatJSONL, Filter{}); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(buf.Bytes())).ReadAll()
	if err != nil {
		t.Fatalf("the CSV does not parse: %v", err)
	}
	if len(rows) != len(chars)+1 {
		t.Fatalf("%d rows, want a header and %d", len(rows), len(chars))
	}
	col = map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	return rows, col, jl.Bytes()
}
