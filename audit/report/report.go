package report

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/custos-mcp/custos/audit"
)

// Source yields the log's records in seq order (audit.Log implements it).
type Source interface {
	Records(ctx context.Context, from, to uint64, fn func(seq uint64, canonical []byte) error) error
}

// TPOPurposes are the HL7 v3 PurposeOfUse codes for treatment, payment and
// health care operations. Disclosures for these purposes are exempt from
// the accounting of disclosures (45 CFR 164.528(a)(1)(i)), so the
// Disclosures view leaves them out.
var TPOPurposes = []string{
	"TREAT", "ETREAT", "CAREMGT", "COC", "CLINTRCH", "POPHLTH",
	"HPAYMT", "CLMATTCH", "COVAUTH", "COVERAGE", "ELIGDTRM", "ELIGVER", "ENROLLM", "REMITADV",
	"HOPERAT", "HQUALIMP", "HSYSADMIN", "MEMADMIN", "OPERAT", "PATADMIN", "PATSFTY", "RECORDMGT", "TRAIN",
}

// Query selects records. Zero fields select everything.
type Query struct {
	// Patients are the keyed hashes of one patient id under each audit key
	// version in use (audit.Pseudonym); a record matches if it concerns any.
	Patients []string `json:"-"`
	// PatientLabel is how the report names the patient (e.g. "the patient
	// whose lookup value is hk1-…"); it is never the raw id.
	PatientLabel string `json:"patient,omitempty"`
	// Tenant, with Patients, is the patient's tenant: a lookup value is
	// not per tenant (audit.PatientRef), so a patient is the lookup value
	// in one tenant. "" selects the lookup value in every tenant, each
	// tenant's rows apart (Row.Tenant, Report.Tenants), never merged.
	// Records naming the lookup value in no URI are kept either way, in
	// rows of tenant "".
	Tenant      string    `json:"tenant,omitempty"`
	User        string    `json:"user,omitempty"`
	Denials     bool      `json:"denials,omitempty"`
	BreakGlass  bool      `json:"break_glass,omitempty"`
	Disclosures bool      `json:"disclosures,omitempty"`
	Since       time.Time `json:"since,omitzero"`
	Until       time.Time `json:"until,omitzero"`
}

// Row is one matching record, in the reader's terms.
type Row struct {
	Seq          uint64    `json:"seq"`
	Time         time.Time `json:"time"`
	Action       string    `json:"action"`
	Outcome      string    `json:"outcome"`
	Reason       string    `json:"reason"`
	User         string    `json:"user"`
	Roles        []string  `json:"roles"`
	Client       string    `json:"client"`
	PurposeOfUse string    `json:"purpose_of_use"`
	// Tenant is, in a patient report, the tenant of the patient this row
	// is about ("" when the record names the patient in no URI); a
	// record that names the lookup value in two tenants is two rows.
	Tenant      string   `json:"tenant,omitempty"`
	Resources   []string `json:"resources"`
	Obligations []string `json:"obligations"`
	BreakGlass  bool     `json:"break_glass"`
	Hash        string   `json:"hash"`
}

// KeyVersions says which audit key versions a patient lookup searched. A
// record names a patient under the keyed hash of the version in force when
// it was written (its keys field), so a lookup finds exactly the records
// keyed under the versions it searched.
type KeyVersions struct {
	// Searched are the key ids searched ("secret/custos/audit-hmac-key@3"),
	// newest first.
	Searched []string `json:"searched"`
	// NotSearched are the versions that could not be read, and why ([]:
	// every version was searched).
	NotSearched []KeyProblem `json:"not_searched"`
	// GapAccepted says the operator accepted NotSearched explicitly: the
	// records keyed under those versions are missing from the answer.
	GapAccepted bool `json:"gap_accepted,omitempty"`
}

// KeyProblem is a key version that could not be searched.
type KeyProblem struct {
	Key     string `json:"key"`
	Problem string `json:"problem"`
}

// WriteText writes the versions searched and, if any, the ones not searched
// and what that means for the answer.
func (k KeyVersions) WriteText(w io.Writer) {
	fmt.Fprintf(w, "audit key versions searched: %s\n", strings.Join(k.Searched, ", "))
	for _, p := range k.NotSearched {
		fmt.Fprintf(w, "audit key version NOT searched: %s (%s)\n", p.Key, p.Problem)
	}
	if len(k.NotSearched) > 0 && k.GapAccepted {
		fmt.Fprintln(w, "GAP ACCEPTED (--accept-key-gap): records keyed under the versions not searched are MISSING from this answer")
	}
}

// Report is the answer to a Query.
type Report struct {
	Query Query `json:"query"`
	// KeyVersions names the audit key versions a patient lookup searched
	// (nil without --patient).
	KeyVersions *KeyVersions `json:"key_versions,omitempty"`
	Scanned     uint64       `json:"scanned"`
	// Tenants are, in a patient report, the tenants the lookup value was
	// found in, one entry per tenant with its rows ("" for records that
	// name the patient in no URI), in order of first appearance: the
	// patients who share an id in several tenants, each apart; [] in a
	// report that matched nothing or has no patient.
	Tenants []TenantRows `json:"tenants"`
	Rows    []Row        `json:"rows"`
	// ByUser and ByOut count the matching records by user and outcome:
	// a record of several rows (Row.Tenant) once.
	ByUser map[string]int `json:"by_user"`
	ByOut  map[string]int `json:"by_outcome"`
}

// TenantRows counts a patient report's rows of one tenant.
type TenantRows struct {
	Tenant string `json:"tenant"`
	Rows   int    `json:"rows"`
}

// IsBreakGlass reports whether r was an emergency (break-the-glass) access,
// by the marks custos itself writes: purpose of use ETREAT (the policy
// allows a break-the-glass read only under it, and a btg/* record carries
// it), an action btg/* (a grant's event), or a reason with the field
// break_glass (the policy's reason of a read a grant allowed) or
// grant=<id> (that read's, and the grants a list page or a completion
// relied on: server grantsRelied), a field being what lies between
// commas, spaces and quotes. A substring "btg" anywhere in the reason
// counted: a policy/load of a signing key named btg-2026, a policy's
// reason naming a unit "rbtgw", were emergency accesses in the report
// (TestBreakGlassIsAMarkNotASubstring). Only custos's own words of the
// reason count, never a Go-quoted value in it (unquoted): a refusal's
// reason holds the caller's tenant and the session owner's sub, tenant and
// client Go-quoted (",tenant=\"…\"", since h-edge3), and a token of
// tenant "btg-clinic" made each of its refusals a break-the-glass access
// (TestBreakGlassIsNotReadInAQuotedValue). An auditor's access record
// (audit.LogUseActions) never is: it reads the log, and its reason names
// what was asked, so until h-review52 each run of the break-the-glass
// report listed its own record ("break_glass") as an emergency access
// (TestAuditorAccessIsNotBreakGlass).
func IsBreakGlass(r audit.Record) bool {
	if slices.Contains(audit.LogUseActions, r.Action) {
		return false
	}
	if r.PurposeOfUse == "ETREAT" || strings.HasPrefix(r.Action, "btg/") {
		return true
	}
	for _, f := range strings.FieldsFunc(unquoted(r.Reason), func(c rune) bool { return c == ',' || c == ' ' || c == '"' }) {
		if id, ok := strings.CutPrefix(f, "grant="); f == "break_glass" || ok && id != "" {
			return true
		}
	}
	return false
}

// unquoted is s with each Go-quoted string in it (strconv.QuotedPrefix at a
// '"') removed; a '"' that opens no valid quoted string is kept as it is.
func unquoted(s string) string {
	i := strings.IndexByte(s, '"')
	if i < 0 {
		return s
	}
	var b strings.Builder
	for i >= 0 {
		b.WriteString(s[:i])
		q, err := strconv.QuotedPrefix(s[i:])
		if err != nil {
			b.WriteByte('"')
			s = s[i+1:]
		} else {
			s = s[i+len(q):]
		}
		i = strings.IndexByte(s, '"')
	}
	b.WriteString(s)
	return b.String()
}

// Match reports whether r satisfies q (pure).
func (q Query) Match(r audit.Record) bool {
	switch {
	case !q.Since.IsZero() && r.Time.Before(q.Since):
		return false
	case !q.Until.IsZero() && !r.Time.Before(q.Until):
		return false
	case q.User != "" && r.Principal.Sub != q.User:
		return false
	case q.Denials && r.Outcome != audit.OutcomeDeny:
		return false
	case q.BreakGlass && !IsBreakGlass(r):
		return false
	case len(q.Patients) > 0 && len(q.patientRefs(r)) == 0:
		return false
	case q.Disclosures && (r.Outcome != audit.OutcomeAllow || r.Action != "resources/read" || slices.Contains(TPOPurposes, r.PurposeOfUse)):
		return false
	}
	return true
}

// patientRefs are the patients of r that q asks about: a lookup value of
// q.Patients, in q.Tenant when it names one, or in no tenant (a record
// that names the lookup value in no URI, e.g. a completion, cannot say
// whose it is: it is kept, in its own rows, so that no access is missed).
func (q Query) patientRefs(r audit.Record) []audit.PatientRef {
	return slices.DeleteFunc(audit.PatientRefs(r), func(p audit.PatientRef) bool {
		return !slices.Contains(q.Patients, p.Pseudonym) || q.Tenant != "" && p.Tenant != "" && p.Tenant != q.Tenant
	})
}

// Run scans the records from..to (0 = to the end) and returns those q
// matches. progress, if not nil, is called with the records scanned so far
// and total.
func Run(ctx context.Context, src Source, q Query, total uint64, progress func(done, total int)) (Report, error) {
	rep := Report{Query: q, Tenants: []TenantRows{}, Rows: []Row{}, ByUser: map[string]int{}, ByOut: map[string]int{}}
	err := src.Records(ctx, 1, total, func(seq uint64, canonical []byte) error {
		rep.Scanned++
		if progress != nil && rep.Scanned%4096 == 0 {
			progress(int(rep.Scanned), int(total))
		}
		r, err := audit.Decode(canonical)
		if err != nil {
			return fmt.Errorf("report: record %d does not decode: %w", seq, err)
		}
		if !q.Match(r) {
			return nil
		}
		row := Row{
			Seq: r.Seq, Time: r.Time, Action: r.Action, Outcome: r.Outcome, Reason: r.Reason,
			User: r.Principal.Sub, Roles: orEmpty(r.Principal.Roles), Client: r.Principal.ClientID,
			PurposeOfUse: r.PurposeOfUse, Resources: orEmpty(r.URIs), Obligations: orEmpty(r.Obligations),
			BreakGlass: IsBreakGlass(r), Hash: audit.HashRecord(canonical),
		}
		// by_user and by_outcome count records, as "N of M records
		// match" does: a record of several rows once.
		rep.ByUser[r.Principal.Sub]++
		rep.ByOut[r.Outcome]++
		if len(q.Patients) == 0 {
			rep.Rows = append(rep.Rows, row)
			return nil
		}
		// One row per tenant the patient is named in; a list page
		// concerns many patients: show only this one's resources there.
		var tenants []string
		for _, p := range q.patientRefs(r) {
			if !slices.Contains(tenants, p.Tenant) {
				tenants = append(tenants, p.Tenant)
			}
		}
		for _, t := range tenants {
			row.Tenant = t
			row.Resources = orEmpty(slices.DeleteFunc(slices.Clone(r.URIs), func(u string) bool {
				return !slices.ContainsFunc(q.Patients, func(p string) bool {
					ut, ok := audit.URIPatientTenant(u, p)
					return ok && ut == t
				})
			}))
			rep.Rows = append(rep.Rows, row)
		}
		return nil
	})
	if len(q.Patients) > 0 {
		for _, row := range rep.Rows {
			i := slices.IndexFunc(rep.Tenants, func(tr TenantRows) bool { return tr.Tenant == row.Tenant })
			if i < 0 {
				i = len(rep.Tenants)
				rep.Tenants = append(rep.Tenants, TenantRows{Tenant: row.Tenant})
			}
			rep.Tenants[i].Rows++
		}
	}
	if progress != nil {
		progress(int(rep.Scanned), int(max(total, rep.Scanned)))
	}
	return rep, err
}

// Records is the number of records the report matched: its rows, but a
// record naming the patient's lookup value in several tenants once,
// though it is a row in each (rows are in seq order).
func (rep Report) Records() int {
	n := 0
	for i, row := range rep.Rows {
		if i == 0 || row.Seq != rep.Rows[i-1].Seq {
			n++
		}
	}
	return n
}

// WriteJSON writes the report as one indented JSON document. Every list
// is present, [] when empty, never omitted or null, whatever made rep (Run,
// or the decoding of another report's JSON, as the CLI does with the
// admin socket's answer): a reader iterates .tenants[] or
// .key_versions.not_searched[] without a check.
func (rep Report) WriteJSON(w io.Writer) error {
	rep.Tenants, rep.Rows = orEmpty(rep.Tenants), orEmpty(rep.Rows)
	if rep.KeyVersions != nil {
		kv := *rep.KeyVersions
		kv.Searched, kv.NotSearched = orEmpty(kv.Searched), orEmpty(kv.NotSearched)
		rep.KeyVersions = &kv
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteTable writes the report as an aligned text table with a heading
// that says what was asked and a summary line.
func (rep Report) WriteTable(w io.Writer) error {
	q := rep.Query
	var what []string
	switch {
	case q.Disclosures:
		what = append(what, "accounting of disclosures (45 CFR 164.528; treatment, payment and operations left out)")
	case q.PatientLabel != "":
		what = append(what, "accesses, including denials")
	}
	if q.PatientLabel != "" {
		what = append(what, "patient "+audit.Printable(q.PatientLabel))
		if q.Tenant != "" {
			what = append(what, "tenant "+audit.Printable(q.Tenant))
		}
	}
	if q.User != "" {
		what = append(what, "user "+audit.Printable(q.User))
	}
	if q.Denials {
		what = append(what, "denials")
	}
	if q.BreakGlass {
		what = append(what, "break-the-glass accesses")
	}
	if !q.Since.IsZero() || !q.Until.IsZero() {
		what = append(what, fmt.Sprintf("from %s until %s", fmtTime(q.Since, "the start"), fmtTime(q.Until, "now")))
	}
	if len(what) == 0 {
		what = append(what, "all records")
	}
	fmt.Fprintf(w, "custos audit report: %s\n", strings.Join(what, "; "))
	if rep.KeyVersions != nil {
		rep.KeyVersions.WriteText(w)
	}
	fmt.Fprintf(w, "%d of %d records match", rep.Records(), rep.Scanned)
	if rep.Records() != len(rep.Rows) {
		fmt.Fprintf(w, " (%d rows: a record naming the lookup value in several tenants is a row in each)", len(rep.Rows))
	}
	fmt.Fprintln(w)
	if len(rep.Tenants) == 0 {
		fmt.Fprintln(w)
		return writeRows(w, rep.Rows)
	}
	// A lookup value names one patient per tenant: each tenant's rows
	// apart, under its own heading, never merged.
	var named []string
	for _, tr := range rep.Tenants {
		if tr.Tenant != "" {
			named = append(named, audit.Printable(tr.Tenant))
		}
	}
	if len(named) > 1 {
		fmt.Fprintf(w, "the lookup value is found in %d tenants (%s): a patient id is unique within a tenant only, so these are %d patients, each listed apart (--tenant T selects one)\n",
			len(named), strings.Join(named, ", "), len(named))
	}
	for _, tr := range rep.Tenants {
		name := "tenant " + audit.Printable(tr.Tenant)
		if tr.Tenant == "" {
			name = "no tenant named (records naming the lookup value in no URI: they do not say which tenant's patient)"
		}
		fmt.Fprintf(w, "\n%s: %d rows\n", name, tr.Rows)
		rows := slices.DeleteFunc(slices.Clone(rep.Rows), func(r Row) bool { return r.Tenant != tr.Tenant })
		if err := writeRows(w, rows); err != nil {
			return err
		}
	}
	return nil
}

// writeRows writes rows as an aligned text table.
func writeRows(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME (UTC)\tUSER\tROLES\tCLIENT\tPURPOSE\tACTION\tOUTCOME\tREASON\tRESOURCES")
	// Every cell is the record's text, which a token issuer, an OAuth
	// client or a policy error wrote: audit.Printable keeps each record on
	// its line and in its columns, and the terminal's screen the record's.
	p, list := audit.Printable, func(s []string, sep string) string {
		out := make([]string, len(s))
		for i, e := range s {
			out[i] = audit.Printable(e)
		}
		return strings.Join(out, sep)
	}
	for _, r := range rows {
		res := list(r.Resources, " ")
		if len(r.Resources) > 2 {
			res = fmt.Sprintf("%s (+%d more)", list(r.Resources[:2], " "), len(r.Resources)-2)
		}
		bg := ""
		if r.BreakGlass {
			bg = " [BREAK-GLASS]"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s%s\t%s\t%s\n", r.Seq, r.Time.UTC().Format("2006-01-02 15:04:05"),
			p(r.User), list(r.Roles, ","), p(r.Client), p(r.PurposeOfUse), p(r.Action), p(r.Outcome), bg, p(r.Reason), res)
	}
	return tw.Flush()
}

func fmtTime(t time.Time, zero string) string {
	if t.IsZero() {
		return zero
	}
	return t.UTC().Format(time.RFC3339)
}

// orEmpty is s, or an empty list for nil: an empty list ([]) is [] in
// the JSON report, never null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
