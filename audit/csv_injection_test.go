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

// formatControls are the bidirectional controls and invisible format
// characters a CSV cell must not hold as they are: with the text of the
// escape each is written as.
var formatControls = []struct {
	r    rune
	text string
}{
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
	l, _ := mustOpen(t, Options{Node: "n"})
	ctx := context.Background()
	for _, c := range formatControls {
		s := string(c.r)
		if _, err := l.Append(ctx, Entry{Action: "resources/read", Outcome: OutcomeAllow, Reason: "by=" + s + "ops",
			Principal:    Principal{Sub: "dr" + s, Roles: []string{s + "clinician", "nurse"}, ClientID: "claude" + s + "desktop"},
			PurposeOfUse: "TREAT", Session: s, URIs: []string{"u" + s}, Patients: []string{s + "p"}}); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := l.Export(ctx, &buf, FormatCSV, Filter{}); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(buf.Bytes())).ReadAll()
	if err != nil {
		t.Fatalf("the CSV does not parse: %v", err)
	}
	if len(rows) != len(formatControls)+1 {
		t.Fatalf("%d rows, want a header and %d", len(rows), len(formatControls))
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
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
	var jl bytes.Buffer
	if _, err := l.Export(ctx, &jl, FormatJSONL, Filter{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range formatControls {
		if !strings.Contains(jl.String(), "claude"+string(c.r)+"desktop") {
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
	} {
		if got := CSVCell(tc.in); got != tc.want {
			t.Errorf("CSVCell(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
