package audit

import (
	"bytes"
	"context"
	"encoding/csv"
	"strings"
	"testing"
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
