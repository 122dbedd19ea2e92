package impact

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/custos-mcp/custos/audit"
)

// WriteJSON writes the report as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes a summary and, for every decision that would change,
// one line: seq, time, user, purpose, resource type, the change, and what
// differs (reasons before → after; obligations removed "-" and added "+").
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "custos policy impact: %s\n", span(r.Since, r.Until))
	fmt.Fprintf(w, "%d records in range, %d decisions replayed, %d without a stored input (lists, refusals) skipped\n",
		r.InRange, r.Replayed, r.Skipped)
	c := r.Counts
	fmt.Fprintf(w, "allow→deny %d   deny→allow %d   obligations changed %d   replay errors %d   unchanged %d\n",
		c.AllowToDeny, c.DenyToAllow, c.ObligationsChanged, c.ReplayError, c.Unchanged)
	if len(r.Rows) == 0 {
		fmt.Fprintln(w, "\nNo decision would change.")
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME (UTC)\tUSER\tPURPOSE\tTYPE\tCHANGE\tREASONS BEFORE → AFTER\tOBLIGATIONS")
	for _, row := range r.Rows {
		typ := row.ResourceType
		if typ == "" {
			typ = "-"
		}
		change := row.Before + "→" + row.After
		switch row.Change {
		case ChangeObligations:
			change = "obligations"
		case ChangeReplayError:
			change = row.Before + "→deny (error)"
		}
		reasons := strings.Join(row.ReasonsBefore, ",") + " → " + strings.Join(row.ReasonsAfter, ",")
		// The user, purpose and reasons are the records' (and a candidate
		// policy's) text: audit.Printable keeps each row on its line and
		// in its columns, and escape sequences off the terminal.
		p := audit.Printable
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Seq, row.Time.UTC().Format("2006-01-02 15:04:05"),
			p(row.User), p(row.PurposeOfUse), p(typ), p(change), p(reasons), p(obligationDiff(row)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, row := range r.Rows {
		if row.Error != "" {
			fmt.Fprintf(w, "seq %d: candidate error: %s\n", row.Seq, audit.Printable(row.Error))
		}
	}
	return nil
}

// obligationDiff is "-removed +added" between the obligations before and
// after, sorted; "-" when they are the same or the candidate denies.
func obligationDiff(row Row) string {
	if row.After != Allow {
		return "-"
	}
	var out []string
	for _, o := range row.ObligationsBefore {
		if !slices.Contains(row.ObligationsAfter, o) {
			out = append(out, "-"+o)
		}
	}
	for _, o := range row.ObligationsAfter {
		if !slices.Contains(row.ObligationsBefore, o) {
			out = append(out, "+"+o)
		}
	}
	if len(out) == 0 {
		return "-"
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > 4 {
		return fmt.Sprintf("%s (+%d more)", strings.Join(out[:4], " "), len(out)-4)
	}
	return strings.Join(out, " ")
}

func span(since, until time.Time) string {
	if since.IsZero() && until.IsZero() {
		return "every audited decision"
	}
	f := func(t time.Time, zero string) string {
		if t.IsZero() {
			return zero
		}
		return t.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("audited decisions from %s until %s", f(since, "the start"), f(until, "now"))
}
