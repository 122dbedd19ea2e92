package audit

import (
	"bytes"
	"context"
	"encoding/csv"
	"testing"
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
	} {
		if got := CSVSafe(tc.in); got != tc.want {
			t.Errorf("CSVSafe(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got, want := CSVList([]string{"clinician", "=1+2", "@x", "ok"}), "clinician;'=1+2;'@x;ok"; got != want {
		t.Errorf("CSVList = %q, want %q", got, want)
	}
}
