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
	for name, want := range map[string]string{"sub": "'" + evil, "reason": "'-1+1", "client_id": "'@c", "action": "resources/read", "keys": "'+x;=cmd|' /C calc'!A0"} {
		if got := row[col[name]]; got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}
