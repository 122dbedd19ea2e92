package report

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/bundle"
	auditreport "github.com/custos-mcp/custos/audit/report"
	"github.com/custos-mcp/custos/compliance"
	"github.com/custos-mcp/custos/policy/btg"
)

// AccessActions are the actions of records that are accesses to patient
// data (or attempts): everything a client asks of resources.
var AccessActions = []string{
	"resources/list", "resources/read", "resources/templates/list",
	"complete", "subscribe", "unsubscribe", "notify",
}

// RefusalActions are requests refused before a policy decision (no valid
// token, rate limit).
var RefusalActions = []string{"auth/reject", "http/rate_limited"}

// Record classes (pure).
func isAccess(r audit.Record) bool { return slices.Contains(AccessActions, r.Action) }

func isDenial(r audit.Record) bool { return isAccess(r) && r.Outcome == audit.OutcomeDeny }

func isRefusal(r audit.Record) bool {
	return slices.Contains(RefusalActions, r.Action) || r.Outcome == audit.OutcomeError
}

func isBreakGlass(r audit.Record) bool { return isAccess(r) && auditreport.IsBreakGlass(r) }

func isGrantEvent(r audit.Record) bool { return strings.HasPrefix(r.Action, "btg/") }

// isPolicyEvent: a policy's lifecycle, loaded or rejected. policy/impact
// starts with "policy/" too, but it is an auditor's access record (a
// replay of decisions), not an event of the policy.
func isPolicyEvent(r audit.Record) bool {
	return r.Action == "policy/load" || r.Action == "policy/reject"
}

// Rules are the recomputation rules of the figures, keyed by JSON path.
// "records" means the lines of the bundle's records.jsonl; "access" a
// record whose action is one of AccessActions.
var Rules = map[string]string{
	"summary.records":              "every record of the bundle (records.jsonl, one per line)",
	"summary.accesses":             "records whose action is resources/list, resources/read, resources/templates/list, complete, subscribe, unsubscribe or notify",
	"summary.allowed":              "accesses with outcome allow",
	"summary.denials":              "accesses with outcome deny",
	"summary.errors":               "accesses with outcome error",
	"summary.refusals":             "records with action auth/reject or http/rate_limited, or with outcome error (any action)",
	"summary.refused_requests":     "the requests the summary.refusals records stand for: 1 for each, but N for an aggregate refusal record (an auth/reject or http/rate_limited deny, or an error whose reason starts with disk_low, whose reason ends ,aggregate,count=N,window=START/END), which is that row's count in refusals[]",
	"summary.break_glass_accesses": "accesses with purpose_of_use ETREAT, or a reason with the field break_glass or grant=<id> outside its quoted values",
	"summary.grant_events":         "records whose action starts with btg/ (grant, revoke, expire, refuse, review)",
	"summary.policy_events":        "records whose action is policy/load or policy/reject (not the access record policy/impact)",
	"days[]":                       "records whose time (UTC) falls on date; each day is the contiguous seq range seqs; the counts apply the summary rules to those records (refused_requests: summary.refused_requests' rule); accesses_by_purpose counts accesses by purpose_of_use",
	"patients[]":                   "accesses whose patients field contains id (a keyed-hash lookup value) and whose uris name it in tenant (the URI's authority; \"\" when no URI names it): one row per (tenant, id), as one id in two tenants is two patients; a list naming several patients counts for each; keys: the audit-hmac= entries of those records' keys field",
	"summary.patients":             "distinct (tenant, lookup value) pairs of accesses (patients[]), a lookup value named in no URI counted only when no tenant names it (it is one of those patients); users[].patients the same over a user's accesses; summary.patient_keys: the audit-hmac= key versions of those records (with several, one patient may have one lookup value per version)",
	"users[]":                      "accesses whose principal.sub is id",
	"denials[]":                    "one row per record counted in summary.denials",
	"refusals[]":                   "one row per record counted in summary.refusals",
	"break_glass.grants[]":         "btg/* records whose reason has grant=id (its first grant=), tenant: their tenant=; uses: accesses whose reason names grant=id and whose URIs include one of the grant's tenant (or name no URI, or the grant's tenant is unknown); reviewed: a btg/review record follows the last use and, for a grant made in the period, one states uses=n with n at least the grant's uses",
	"break_glass.other_tenant":     "accesses whose reason names grant=id while every URI of theirs is of a tenant other than that grant's (break_glass.grants[].other_tenant)",
	"policies[]":                   "records whose policy_revision is revision (policy/load records: revision before ' bundle=', the digest after it)",
	"keys[]":                       "records whose keys field contains key",
	"retention.months[]":           "records of the whole log (not only the bundle) whose time falls in month: the contiguous range seqs; export or prove them with custos audit export --from-seq/--to-seq or custos audit prove",
	"retention.past_retention":     "records of the whole log older than the retention period at generation time",
}

// Builder turns the records of a bundle into a Report. Feed it every record
// of the bundle in seq order (Add), then call Build. It does no I/O.
type Builder struct {
	next uint64 // expected seq; 0 before the first

	rep         Report
	days        []*Day
	patients    map[string]*subjectAcc
	users       map[string]*subjectAcc
	grants      map[string]*Grant
	grantIDs    []string
	policies    map[string]*Policy
	revisions   []string
	keys        map[string]*KeyUse
	patientKeys map[string]bool // audit-hmac key versions of accesses naming patients
}

type subjectAcc struct {
	s      Subject
	others map[string]bool
	purp   map[string]bool
	keys   map[string]bool // a patient's audit-hmac key versions
}

// hmacKeys are the audit keyed-hash key versions a record names.
func hmacKeys(r audit.Record) []string {
	var out []string
	for _, k := range r.Keys {
		if strings.HasPrefix(k, "audit-hmac=") {
			out = append(out, k)
		}
	}
	return out
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder {
	return &Builder{
		patients: map[string]*subjectAcc{}, users: map[string]*subjectAcc{},
		grants: map[string]*Grant{}, policies: map[string]*Policy{}, keys: map[string]*KeyUse{}, patientKeys: map[string]bool{},
	}
}

// Add accounts one record. Records must come in seq order with no gap
// (the bundle's invariant); anything else is an error naming the seqs.
func (b *Builder) Add(r audit.Record) error {
	if b.next != 0 && r.Seq != b.next {
		return fmt.Errorf("report: record seq %d follows %d: the records are not a contiguous range", r.Seq, b.next-1)
	}
	b.next = r.Seq + 1
	s := &b.rep.Summary
	s.Records.add(r.Seq)
	if b.rep.Period.First.Seq == 0 {
		b.rep.Period.First = EventRef{r.Seq, r.Time}
	}
	b.rep.Period.Last = EventRef{r.Seq, r.Time}

	date := r.Time.UTC().Format(time.DateOnly)
	if n := len(b.days); n == 0 || b.days[n-1].Date != date {
		b.days = append(b.days, &Day{Date: date, Outcomes: map[string]int{}, Purposes: map[string]int{}})
	}
	day := b.days[len(b.days)-1]
	day.Seqs.Add(r.Seq)
	day.Records++

	for _, k := range r.Keys {
		ku := b.keys[k]
		if ku == nil {
			ku = &KeyUse{Key: k, First: r.Time}
			b.keys[k] = ku
		}
		ku.Records.add(r.Seq)
		ku.Last = r.Time
	}
	b.policy(r)

	if isRefusal(r) {
		s.Refusals.add(r.Seq)
		day.Refusals++
		ev := event(r)
		n, ok := bundle.AggregateCount(r)
		if ok {
			ev.Count = n
		} else {
			n = 1
		}
		s.RefusedRequests += n
		day.RefusedRequests += n
		b.rep.Refusals = append(b.rep.Refusals, ev)
	}
	switch {
	case isAccess(r):
		b.access(r, day)
	case isGrantEvent(r):
		s.GrantEvents.add(r.Seq)
		day.Grants++
		b.grantEvent(r)
	case isPolicyEvent(r):
		s.PolicyEvents.add(r.Seq)
		if r.Action == "policy/reject" {
			b.rep.PolicyRejections = append(b.rep.PolicyRejections, event(r))
		}
	}
	return nil
}

func event(r audit.Record) Event {
	return Event{Seq: r.Seq, Time: r.Time, Action: r.Action, Outcome: r.Outcome, Reason: r.Reason,
		User: r.Principal.Sub, Client: r.Principal.ClientID, Purpose: r.PurposeOfUse, Patients: len(r.Patients)}
}

func (b *Builder) access(r audit.Record, day *Day) {
	s := &b.rep.Summary
	s.Accesses.add(r.Seq)
	day.Accesses++
	day.Outcomes[r.Outcome]++
	day.Purposes[cmp.Or(r.PurposeOfUse, "(none)")]++
	switch r.Outcome {
	case audit.OutcomeAllow:
		s.Allowed.add(r.Seq)
	case audit.OutcomeDeny:
		s.Denials.add(r.Seq)
		day.Denials++
		b.rep.Denials = append(b.rep.Denials, event(r))
	case audit.OutcomeError:
		s.Errors.add(r.Seq)
	}
	bg := isBreakGlass(r)
	if bg {
		s.BreakGlassAccesses.add(r.Seq)
		day.BreakGlass++
		b.rep.BreakGlass.Accesses.add(r.Seq)
		ids := grantIDs(r.Reason)
		if len(ids) == 0 {
			b.rep.BreakGlass.WithoutGrant.add(r.Seq)
		}
		tenants := uriTenants(r.URIs)
		for _, id := range ids {
			g := b.grant(id)
			g.Uses = append(g.Uses, Use{Seq: r.Seq, Time: r.Time, Action: r.Action, Outcome: r.Outcome, Tenants: tenants})
		}
	}
	sub := r.Principal.Sub
	u := account(b.users, sub, r, bg)
	// A patient is a lookup value in a tenant (audit.PatientRef): one id
	// in two tenants is two patients, two rows, never one.
	for _, p := range audit.PatientRefs(r) {
		key := p.Tenant + "\x00" + p.Pseudonym
		u.others[key] = true
		pa := account(b.patients, key, r, bg)
		pa.s.ID, pa.s.Tenant = p.Pseudonym, p.Tenant
		pa.others[sub] = true
		for _, k := range hmacKeys(r) {
			pa.keys[k] = true
			b.patientKeys[k] = true
		}
	}
}

func account(m map[string]*subjectAcc, id string, r audit.Record, bg bool) *subjectAcc {
	a := m[id]
	if a == nil {
		a = &subjectAcc{s: Subject{ID: id, First: r.Time}, others: map[string]bool{}, purp: map[string]bool{}, keys: map[string]bool{}}
		m[id] = a
	}
	a.s.Accesses.add(r.Seq)
	a.s.Last = r.Time
	switch r.Outcome {
	case audit.OutcomeAllow:
		a.s.Allowed++
	case audit.OutcomeDeny:
		a.s.Denied++
	case audit.OutcomeError:
		a.s.Errors++
	}
	if bg {
		a.s.BreakGlass++
	}
	a.purp[cmp.Or(r.PurposeOfUse, "(none)")] = true
	return a
}

// uriTenants are the tenants of uris, in order, once each: the authority
// of each (SCHEME://TENANT/...; a record's URIs keep it, only the patient
// segment is pseudonymized).
func uriTenants(uris []string) []string {
	var out []string
	for _, u := range uris {
		_, rest, ok := strings.Cut(u, "://")
		tenant, _, _ := strings.Cut(rest, "/")
		if ok && tenant != "" && !slices.Contains(out, tenant) {
			out = append(out, tenant)
		}
	}
	return out
}

// ofTenant reports whether an access with URIs of tenants is one of a
// grant of tenant: tenant unknown (""), an access naming no URI, or one
// of its URIs of that tenant.
func ofTenant(tenants []string, tenant string) bool {
	return tenant == "" || len(tenants) == 0 || slices.Contains(tenants, tenant)
}

// grantIDs returns the grant ids an access record's reason names
// ("break_glass,grant=<id>", possibly with ",page=N").
func grantIDs(reason string) []string {
	var ids []string
	for _, part := range strings.FieldsFunc(reason, func(c rune) bool { return c == ',' || c == ' ' }) {
		if id, ok := strings.CutPrefix(part, "grant="); ok && id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// parseEventReason reads a btg/* record's reason: key=value pairs
// separated by spaces, a value either bare or a Go-quoted string
// (btg.Event.AuditReason). The grant id is the first pair's: AuditReason
// writes grant=<id> (a UUID) first and the grantee verbatim after it, so a
// later grant= can only be text of a grantee name with a space in it
// ("dr-x grant=<other id>", refused by 'custos btg grant' since) and never
// moves the record to another grant. The pairs after the grantee are
// custos's own, written after it: for them the last value wins.
func parseEventReason(s string) map[string]string {
	out := map[string]string{}
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		key, rest, ok := strings.Cut(s, "=")
		if !ok || strings.ContainsRune(key, ' ') {
			break
		}
		var val string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				break
			}
			val, _ = strconv.Unquote(q)
			s = rest[len(q):]
		} else {
			val, s, _ = strings.Cut(rest, " ")
		}
		if _, dup := out[key]; dup && key == "grant" {
			continue
		}
		out[key] = val
	}
	return out
}

func (b *Builder) grant(id string) *Grant {
	g := b.grants[id]
	if g == nil {
		g = &Grant{ID: id, Uses: []Use{}, Reviews: []Review{}}
		b.grants[id] = g
		b.grantIDs = append(b.grantIDs, id)
	}
	return g
}

func (b *Builder) grantEvent(r audit.Record) {
	kv := parseEventReason(r.Reason)
	id := kv["grant"]
	if id == "" {
		return
	}
	g := b.grant(id)
	g.Grantee = cmp.Or(g.Grantee, kv["grantee"])
	g.Tenant = cmp.Or(g.Tenant, kv["tenant"])
	if len(r.Patients) > 0 {
		g.Patient = cmp.Or(g.Patient, r.Patients[0])
	}
	ref := &EventRef{r.Seq, r.Time}
	switch r.Action {
	case "btg/grant":
		g.Granted, g.GrantedBy = ref, r.Principal.Sub
		g.Expires, g.TTL = kv["expires"], kv["ttl"]
	case "btg/revoke":
		g.Revoked, g.RevokedBy, g.RevokedByClaimed = ref, r.Principal.Sub, kv["claimed_by"]
	case "btg/expire":
		g.Expired = ref
		g.Expires, g.TTL = cmp.Or(g.Expires, kv["expires"]), cmp.Or(g.TTL, kv["ttl"])
	case "btg/refuse":
		g.Refused, g.RefusedCode = ref, kv["refused"]
		g.Expires, g.TTL = cmp.Or(g.Expires, kv["expires"]), cmp.Or(g.TTL, kv["ttl"])
	case "btg/review":
		g.Reviews = append(g.Reviews, Review{Seq: r.Seq, Time: r.Time, Reviewer: r.Principal.Sub, Claimed: kv["claimed_by"], Verdict: kv["verdict"], Uses: kv["uses"]})
	}
}

func (b *Builder) policy(r audit.Record) {
	if r.PolicyRevision == "" {
		return
	}
	rev, digest, _ := strings.Cut(r.PolicyRevision, " bundle=")
	p := b.policies[rev]
	if p == nil {
		p = &Policy{Revision: rev, Loads: []EventRef{}}
		b.policies[rev] = p
		b.revisions = append(b.revisions, rev)
	}
	p.Bundle = cmp.Or(digest, p.Bundle)
	switch r.Action {
	case "policy/load":
		p.Loads = append(p.Loads, EventRef{r.Seq, r.Time})
	case "policy/reject":
	default:
		p.Decisions.add(r.Seq)
		if p.First.IsZero() {
			p.First = r.Time
		}
		p.Last = r.Time
	}
}

// Inputs is what Build needs besides the records: the results of the
// checks the command ran and what it found beside the log.
type Inputs struct {
	Generated    time.Time
	Tool         string
	Since, Until time.Time
	Bundle       BundleRef
	Verification Verification
	Retention    Retention
	// PriorLoads are the policy/load records before the period
	// (LogScan.PolicyLoads), for the revisions in force at its start.
	PriorLoads []PolicyLoad
	Controls   Controls
	// Grants is grants.db's content; nil when there is none.
	Grants []GrantFileEntry
}

// Build returns the Report of the records added so far.
func (b *Builder) Build(in Inputs) (*Report, error) {
	if b.next == 0 {
		return nil, fmt.Errorf("report: no record in the period")
	}
	rep := b.rep
	rep.Format, rep.Generated, rep.Tool = Format, in.Generated.UTC(), in.Tool
	rep.Period.Since, rep.Period.Until = in.Since, in.Until
	rep.Bundle, rep.Verification, rep.Retention, rep.Controls = in.Bundle, in.Verification, in.Retention, in.Controls
	rep.Rules = maps.Clone(Rules)
	rep.Verification.OK = rep.Verification.Log.OK && rep.Verification.Anchors.OK &&
		rep.Verification.Bundle != nil && rep.Verification.Bundle.OK

	rep.Days = make([]Day, len(b.days))
	for i, d := range b.days {
		rep.Days[i] = *d
	}
	rep.Patients = subjects(b.patients, func(s *Subject, users map[string]bool) { s.Users = len(users) })
	rep.Users = subjects(b.users, func(s *Subject, patients map[string]bool) { s.Patients = patientCount(patients) })
	rep.Summary.Patients, rep.Summary.Users = patientCount(b.patients), len(rep.Users)
	rep.Summary.PatientKeys = append([]string{}, slices.Sorted(maps.Keys(b.patientKeys))...)

	rep.BreakGlass.Grants = []Grant{}
	for _, id := range b.grantIDs {
		// An access is a use of the grant it names in the grant's tenant
		// only; the tenant is known once every record is in (a grant made
		// before the period names it in a later record).
		g := *b.grants[id]
		all := g.Uses
		g.Uses, g.UseSeqs = []Use{}, Seqs{}
		for _, u := range all {
			if ofTenant(u.Tenants, g.Tenant) {
				g.Uses = append(g.Uses, u)
				g.UseSeqs.Add(u.Seq)
			} else {
				g.OtherTenant = append(g.OtherTenant, u)
				rep.BreakGlass.OtherTenant.add(u.Seq)
			}
		}
		g.Reviewed = reviewed(g)
		if !g.Reviewed {
			rep.BreakGlass.Unreviewed++
		}
		rep.BreakGlass.Grants = append(rep.BreakGlass.Grants, g)
	}
	if in.Grants != nil {
		rep.BreakGlass.GrantsFile = crossCheck(in.Grants, b.grants, rep.Period)
	}

	rep.Policies = []Policy{}
	for _, rev := range b.revisions {
		p := *b.policies[rev]
		for _, l := range in.PriorLoads {
			if l.Revision == rev && l.Seq < rep.Period.First.Seq {
				p.LoadedBefore = &EventRef{l.Seq, l.Time}
				p.Bundle = cmp.Or(p.Bundle, l.Bundle)
			}
		}
		rep.Policies = append(rep.Policies, p)
	}
	rep.Keys = []KeyUse{}
	for _, k := range slices.Sorted(maps.Keys(b.keys)) {
		rep.Keys = append(rep.Keys, *b.keys[k])
	}
	for _, l := range []*[]Event{&rep.Denials, &rep.Refusals, &rep.PolicyRejections} {
		if *l == nil {
			*l = []Event{}
		}
	}
	return &rep, nil
}

func subjects(m map[string]*subjectAcc, others func(*Subject, map[string]bool)) []Subject {
	out := make([]Subject, 0, len(m))
	for _, a := range m {
		s := a.s
		others(&s, a.others)
		s.Purposes = slices.Sorted(maps.Keys(a.purp))
		if len(a.keys) > 0 {
			s.Keys = slices.Sorted(maps.Keys(a.keys))
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Subject) int {
		return cmp.Or(cmp.Compare(b.Accesses.Count, a.Accesses.Count), cmp.Compare(a.ID, b.ID), cmp.Compare(a.Tenant, b.Tenant))
	})
	return out
}

// patientCount counts the patients of keys, a set of patient keys
// (tenant NUL lookup value, Builder.access). A lookup value named in no
// URI (tenant "": a completion, a record that does not say whose patient)
// is one of the patients that lookup value names in a tenant when the set
// has one, and a patient of its own only when it has none: one patient
// read in tenant a and named by a completion was counted twice (h-audit6
// until h-review28).
func patientCount[V any](keys map[string]V) int {
	named := map[string]bool{} // lookup values named in some tenant
	for k := range keys {
		if t, p, _ := strings.Cut(k, "\x00"); t != "" {
			named[p] = true
		}
	}
	n := 0
	for k := range keys {
		if t, p, _ := strings.Cut(k, "\x00"); t != "" || !named[p] {
			n++
		}
	}
	return n
}

// reviewed applies btg.Grant.Reviewed, the rule 'custos btg review' uses,
// to the uses and reviews the records show. A btg/review record is written
// when the server next drains grants.db (up to a second later), so a use
// made between the sign-off and that record precedes the record without
// the reviewer having seen it: when the grant was made in the period (all
// its uses are in the bundle), a review also covers only as many uses as
// its record states (uses=<n>, what the reviewer saw).
func reviewed(g Grant) bool {
	bg := btg.Grant{}
	for _, u := range g.Uses {
		bg.Uses = append(bg.Uses, btg.Use{Time: u.Time})
	}
	seen := 0
	for _, r := range g.Reviews {
		bg.Reviews = append(bg.Reviews, btg.Review{Time: r.Time})
		if n, err := strconv.Atoi(r.Uses); err == nil {
			seen = max(seen, n)
		}
	}
	if !bg.Reviewed() {
		return false
	}
	return g.Granted == nil || len(g.Uses) == 0 || seen >= len(g.Uses)
}

func crossCheck(file []GrantFileEntry, recs map[string]*Grant, p Period) *GrantsFile {
	gf := &GrantsFile{Grants: []GrantFileRow{}}
	for _, e := range file {
		row := GrantFileRow{ID: e.ID, Grantee: e.Grantee, Tenant: e.Tenant, Created: e.Created, Expires: e.Expires, FileUses: e.Uses, FileReviews: e.Reviews}
		if g := recs[e.ID]; g != nil {
			// Every access naming the grant: the server records each as a
			// use in grants.db, whatever its tenant.
			row.RecordUses, row.RecReviews, row.RecordTenant = len(g.Uses), len(g.Reviews), g.Tenant
			row.TenantMismatch = e.Tenant != "" && g.Tenant != "" && e.Tenant != g.Tenant
		}
		end := e.Expires
		if !e.Revoked.IsZero() && e.Revoked.Before(end) {
			end = e.Revoked
		}
		// Whole life inside the period's records (reviews may come later:
		// only uses are compared).
		row.Comparable = !e.Created.Before(p.First.Time) && !end.After(p.Last.Time)
		row.Mismatch = row.Comparable && row.FileUses != row.RecordUses || row.TenantMismatch
		if row.Mismatch {
			gf.Mismatches++
		}
		inPeriod := !e.Created.After(p.Last.Time) && !end.Before(p.First.Time)
		if inPeriod || recs[e.ID] != nil {
			gf.Grants = append(gf.Grants, row)
		}
	}
	return gf
}

// PolicyLoad is one policy/load record of the whole log.
type PolicyLoad struct {
	Seq      uint64    `json:"seq"`
	Time     time.Time `json:"time"`
	Revision string    `json:"revision"`
	Bundle   string    `json:"bundle"`
}

// LogScan reads every record of the whole log, in seq order, for the
// retention status and the policy loads before the period. It does no I/O.
type LogScan struct {
	first, last EventRef
	next        uint64
	gapless     bool
	months      []Month
	loads       []PolicyLoad
	cutoff      time.Time // records before it are past retention
	past        Figure
}

// NewLogScan returns an empty LogScan that counts the records older than
// cutoff (now minus the retention period) as past retention.
func NewLogScan(cutoff time.Time) *LogScan { return &LogScan{gapless: true, cutoff: cutoff} }

// Add accounts one record of the log.
func (s *LogScan) Add(r audit.Record) {
	if s.next == 0 {
		s.first = EventRef{r.Seq, r.Time}
		s.gapless = r.Seq == 1
	} else if r.Seq != s.next {
		s.gapless = false
	}
	s.next = r.Seq + 1
	s.last = EventRef{r.Seq, r.Time}
	if r.Time.Before(s.cutoff) {
		s.past.add(r.Seq)
	}
	m := r.Time.UTC().Format("2006-01")
	if n := len(s.months); n == 0 || s.months[n-1].Month != m {
		s.months = append(s.months, Month{Month: m})
	}
	mo := &s.months[len(s.months)-1]
	mo.Seqs.Add(r.Seq)
	mo.Records++
	if r.Action == "policy/load" {
		rev, digest, _ := strings.Cut(r.PolicyRevision, " bundle=")
		s.loads = append(s.loads, PolicyLoad{Seq: r.Seq, Time: r.Time, Revision: rev, Bundle: digest})
	}
}

// PolicyLoads are the policy/load records seen.
func (s *LogScan) PolicyLoads() []PolicyLoad { return s.loads }

// Retention returns the retention status at now for a period of retention
// (now - retention should be the scan's cutoff), given the log's head seq,
// its Merkle tree size and whether it is consistent with its anchored
// checkpoints.
func (s *LogScan) Retention(retention time.Duration, now time.Time, head uint64, treeSize int64, anchorsOK bool) Retention {
	r := Retention{
		Period: retention.String(), PeriodText: DurationText(retention),
		Records: head, Months: s.months, PastRetention: s.past,
	}
	if r.Months == nil {
		r.Months = []Month{}
	}
	if s.next != 0 {
		first, last := s.first, s.last
		r.Oldest, r.Newest = &first, &last
		r.OldestAgeDays = math.Round(now.Sub(first.Time).Hours()/24*100) / 100
	}
	nd := &r.NothingDeleted
	nd.FirstSeq, nd.LastSeq = s.first.Seq, s.last.Seq
	nd.GaplessFromOne = s.gapless && s.last.Seq == head
	nd.TreeSize = treeSize
	nd.TreeSizeEqualsHead = treeSize == int64(head)
	nd.AnchorsConsistent = anchorsOK
	nd.OK = nd.GaplessFromOne && nd.TreeSizeEqualsHead && nd.AnchorsConsistent
	return r
}

// DurationText renders a retention period for people: whole years of
// 365.25 days ("6 years"), else days.
func DurationText(d time.Duration) string {
	const year = 8766 * time.Hour // 365.25 days
	if d > 0 && d%year == 0 {
		if n := d / year; n == 1 {
			return "1 year"
		} else {
			return fmt.Sprintf("%d years", n)
		}
	}
	days := math.Round(d.Hours()/24*100) / 100
	if days == 1 {
		return "1 day"
	}
	return strconv.FormatFloat(days, 'f', -1, 64) + " days"
}

// ControlsFrom lists every control of def with its status: with results
// (the outcomes of a `go test -json` run, named by resultsName), each
// evidence test's outcome and the control's verdict
// (compliance.CheckEvidence); without, StatusNotChecked for all, never
// passed.
func ControlsFrom(def *compliance.Definition, res compliance.Results, resultsName string) Controls {
	c := Controls{Definition: def.Title + " (version " + def.Version + ")", Checked: res != nil, Results: resultsName, Items: []Control{}}
	var statuses []compliance.ControlStatus
	if res != nil {
		statuses, _ = def.CheckEvidence(res)
	}
	for i, ctl := range def.Controls {
		item := Control{ID: ctl.ID, Catalog: catalogName(ctl.ID), Source: ctl.Catalog, Title: ctl.Title,
			Implementation: ctl.Description, Status: StatusNotChecked, Evidence: []EvidenceTest{}}
		for _, ref := range ctl.Evidence {
			result := StatusNotChecked
			if res != nil {
				result = "did not run"
				if st, ok := res[ref]; ok {
					result = string(st)
				}
			}
			item.Evidence = append(item.Evidence, EvidenceTest{Test: ref.String(), Result: result})
		}
		switch {
		case res == nil:
			c.NotChecked++
		case statuses[i].Evidence:
			item.Status = StatusPassed
			c.Passed++
		default:
			item.Status = StatusFailed
			c.Failed++
		}
		c.Items = append(c.Items, item)
	}
	return c
}

// catalogName names a control's catalog from its id (custos's HIPAA ids
// are "hipaa-<section>-..."; NIST's are the catalog's own).
func catalogName(id string) string {
	switch {
	case strings.HasPrefix(id, "hipaa-164.3"):
		return "HIPAA Security Rule"
	case strings.HasPrefix(id, "hipaa-164.5"):
		return "HIPAA Privacy Rule"
	case strings.HasPrefix(id, "hipaa-"):
		return "HIPAA"
	}
	return "NIST SP 800-53 rev5"
}
