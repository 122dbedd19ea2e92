package report

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/custos-mcp/custos/audit"
)

//go:embed report.html.tmpl
var pageTemplate string

// MaxRows bounds each table of the HTML page; report.json has every row.
const MaxRows = 200

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"time": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"date": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format(time.DateOnly)
	},
	"seqs": func(s Seqs) string {
		str := s.String()
		if len(str) > 60 {
			return fmt.Sprintf("%d records, %d…%d (full list in report.json)", s.Len(), s.First(), s.Last())
		}
		return str
	},
	"join": strings.Join,
	"first": func(n int, v any) any {
		switch l := v.(type) {
		case []Subject:
			return l[:min(n, len(l))]
		case []Event:
			return l[:min(n, len(l))]
		case []Grant:
			return l[:min(n, len(l))]
		case []Month:
			return l[:min(n, len(l))]
		}
		return v
	},
	"more": func(n, total int) int { return max(total-n, 0) },
	"yesno": func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	},
	"status": func(s string) string {
		switch s {
		case StatusPassed:
			return "ok"
		case StatusFailed:
			return "bad"
		}
		return "na"
	},
	"rules": func(m map[string]string) [][2]string {
		var out [][2]string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, [2]string{k, m[k]})
		}
		return out
	},
}).Parse(pageTemplate))

// WriteJSON writes the report as report.json: one indented JSON document.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteHTML writes the report as one self-contained HTML page: inline CSS
// and inline SVG charts, no script, and nothing loaded from anywhere (its
// Content-Security-Policy forbids every fetch). The records' text on it (a
// principal, a client, a reason: whatever a token issuer, an OAuth client
// or a policy error wrote) is shown with its non-printable characters
// escaped (audit.Printable): a bidi override, a zero-width or a control
// character is seen as \u202e, \u200b, \x1b, never acted on. report.json
// keeps the exact text.
func (rep *Report) WriteHTML(w io.Writer) error {
	var transcript string
	if rep.Verification.Bundle != nil {
		transcript = rep.Verification.Bundle.Text()
	}
	var b strings.Builder
	err := page.Execute(&b, struct {
		*Report
		Charts     []chart
		Months     chart
		Transcript string
		MaxRows    int
	}{rep, rep.charts(), rep.monthsChart(), transcript, MaxRows})
	if err != nil {
		return err
	}
	// The template is printable text and line feeds; html/template has
	// escaped the markup in the data, and the escapes Printable writes
	// (a backslash and ASCII letters and digits) are text in any context.
	lines := strings.Split(b.String(), "\n")
	for i, l := range lines {
		lines[i] = audit.Printable(l)
	}
	_, err = io.WriteString(w, strings.Join(lines, "\n"))
	return err
}
