package report

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/audit/bundle"
	"github.com/custos-mcp/custos/compliance"
	"github.com/custos-mcp/custos/policy/btg"
)

func TestSeqs(t *testing.T) {
	var s Seqs
	for _, q := range []uint64{1, 2, 3, 3, 5, 9, 10, 11, 12} {
		s.Add(q)
	}
	if got := s.String(); got != "1-3,5,9-12" || s.Len() != 8 || s.First() != 1 || s.Last() != 12 || !s.Contains(10) || s.Contains(4) {
		t.Fatalf("seqs %q len %d", got, s.Len())
	}
	b, _ := json.Marshal(s)
	var back Seqs
	if err := json.Unmarshal(b, &back); err != nil || back.String() != s.String() {
		t.Fatalf("round trip %s -> %q, %v", b, back.String(), err)
	}
	var all []uint64
	back.Each(func(q uint64) { all = append(all, q) })
	if !slices.Equal(all, []uint64{1, 2, 3, 5, 9, 10, 11, 12}) {
		t.Fatalf("Each = %v", all)
	}
	if p, err := ParseSeqs("1-2,3,7"); err != nil || p.String() != "1-3,7" {
		t.Fatalf("adjacent ranges not merged: %q %v", p.String(), err)
	}
	for _, bad := range []string{"0", "3-1", "5,2", "1-3,3", "x", "1,,2"} {
		if _, err := ParseSeqs(bad); err == nil {
			t.Errorf("ParseSeqs(%q) accepted", bad)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Add below the last seq did not panic")
		}
	}()
	s.Add(4)
}

var t0 = time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)

// trail is a small period of records covering every class: reads and a
// list allowed and denied, an error, an auth refusal, a policy load and
// rejection, a break-the-glass grant with two uses, a refused emergency
// read, a revocation and a review.
func trail() []audit.Record {
	rec := func(day, min int, action, outcome, reason, sub, purpose string, patients ...string) audit.Record {
		return audit.Record{Entry: audit.Entry{Action: action, Outcome: outcome, Reason: reason,
			Principal: audit.Principal{Sub: sub, ClientID: "assistant"}, PurposeOfUse: purpose, Patients: patients,
			PolicyRevision: "rev-a", Keys: []string{"audit-hmac=secret/custos/audit-key@2", "cursor=secret/custos/cursor-key@1"}},
			Time: t0.AddDate(0, 0, day).Add(time.Duration(min) * time.Minute)}
	}
	rs := []audit.Record{
		rec(0, 0, "policy/load", "allow", "candidate=sha256:aa", "custos", ""),
		rec(0, 1, "resources/list", "allow", "clinician_care_team", "dr-a", "TREAT", "hk1-p1", "hk1-p2"),
		rec(0, 2, "resources/read", "allow", "clinician_care_team", "dr-a", "TREAT", "hk1-p1"),
		rec(0, 3, "resources/read", "deny", "not_care_team", "dr-b", "TREAT", "hk1-p1"),
		rec(1, 0, "auth/reject", "deny", "http_401,no_token", "", ""),
		rec(1, 1, "resources/read", "deny", "no_grant", "dr-er", "ETREAT", "hk1-p3"),
		rec(1, 2, "btg/grant", "allow", `grant=g1 grantee=dr-er expires=2026-11-21T13:00:00Z ttl=4h0m0s reason="unconscious"`, "op-night", "ETREAT", "hk1-p3"),
		rec(1, 3, "resources/read", "allow", "break_glass,grant=g1", "dr-er", "ETREAT", "hk1-p3"),
		rec(1, 4, "resources/read", "allow", "break_glass,grant=g1,page=2", "dr-er", "ETREAT", "hk1-p3"),
		rec(1, 5, "btg/revoke", "allow", `grant=g1 grantee=dr-er reason="stable"`, "op-night", "ETREAT", "hk1-p3"),
		rec(3, 0, "resources/read", "error", "payload_unavailable", "dr-a", "TREAT", "hk1-p2"),
		rec(3, 1, "btg/review", "allow", `grant=g1 grantee=dr-er verdict=appropriate uses=2 note="documented emergency"`, "privacy-officer", "ETREAT", "hk1-p3"),
		rec(3, 2, "policy/reject", "deny", "candidate=sha256:bb parse error", "custos", ""),
		rec(3, 3, "resources/read", "allow", "researcher", "res-1", "HRESCH", "hk1-p2"),
	}
	rs[0].PolicyRevision = "rev-a bundle=sha256:b1"
	rs[12].PolicyRevision = "rev-a"
	for i := range rs {
		rs[i].Seq = uint64(101 + i)
	}
	return rs
}

func build(t *testing.T, rs []audit.Record, in Inputs) *Report {
	t.Helper()
	b := NewBuilder()
	for _, r := range rs {
		if err := b.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := b.Build(in)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestBuild: the figures of a known trail.
func TestBuild(t *testing.T) {
	rs := trail()
	rep := build(t, rs, Inputs{Generated: t0.AddDate(0, 0, 5), Tool: "custos test",
		PriorLoads: []PolicyLoad{{Seq: 7, Time: t0.AddDate(0, -1, 0), Revision: "rev-a", Bundle: "sha256:b0"}}})
	s := rep.Summary
	for _, c := range []struct {
		name string
		f    Figure
		want string
	}{
		{"records", s.Records, "101-114"},
		{"accesses", s.Accesses, "102-104,106,108-109,111,114"},
		{"allowed", s.Allowed, "102-103,108-109,114"},
		{"denials", s.Denials, "104,106"},
		{"errors", s.Errors, "111"},
		{"refusals", s.Refusals, "105,111"},
		{"break glass", s.BreakGlassAccesses, "106,108-109"},
		{"grant events", s.GrantEvents, "107,110,112"},
		{"policy events", s.PolicyEvents, "101,113"},
	} {
		if c.f.Seqs.String() != c.want || c.f.Count != c.f.Seqs.Len() {
			t.Errorf("%s = %d %q, want %q", c.name, c.f.Count, c.f.Seqs.String(), c.want)
		}
	}
	if s.Patients != 3 || s.Users != 4 || rep.Period.First.Seq != 101 || rep.Period.Last.Seq != 114 {
		t.Errorf("summary %+v period %+v", s, rep.Period)
	}
	if len(rep.Days) != 3 || rep.Days[0].Date != "2026-11-20" || rep.Days[0].Seqs.String() != "101-104" ||
		rep.Days[0].Outcomes["allow"] != 2 || rep.Days[0].Outcomes["deny"] != 1 || rep.Days[1].Purposes["ETREAT"] != 3 || rep.Days[1].Grants != 2 {
		t.Errorf("days %+v", rep.Days)
	}
	p1 := rep.Patients[0]
	if p1.ID != "hk1-p1" || p1.Accesses.Seqs.String() != "102-104" || p1.Users != 2 || p1.Denied != 1 {
		t.Errorf("patients %+v", rep.Patients)
	}
	if i := slices.IndexFunc(rep.Users, func(u Subject) bool { return u.ID == "dr-a" }); i < 0 || rep.Users[i].Patients != 2 || rep.Users[i].Accesses.Count != 3 {
		t.Errorf("users %+v", rep.Users)
	}
	bg := rep.BreakGlass
	if len(bg.Grants) != 1 || bg.WithoutGrant.Seqs.String() != "106" || bg.Unreviewed != 0 {
		t.Fatalf("break glass %+v", bg)
	}
	g := bg.Grants[0]
	if g.ID != "g1" || g.Grantee != "dr-er" || g.Patient != "hk1-p3" || g.Granted.Seq != 107 || g.GrantedBy != "op-night" ||
		g.TTL != "4h0m0s" || g.Expires != "2026-11-21T13:00:00Z" || g.Revoked.Seq != 110 || g.UseSeqs.String() != "108-109" ||
		len(g.Reviews) != 1 || g.Reviews[0].Verdict != "appropriate" || g.Reviews[0].Reviewer != "privacy-officer" || g.Reviews[0].Uses != "2" || !g.Reviewed {
		t.Errorf("grant %+v", g)
	}
	if len(rep.Policies) != 1 || rep.Policies[0].Bundle != "sha256:b1" || len(rep.Policies[0].Loads) != 1 ||
		rep.Policies[0].LoadedBefore == nil || rep.Policies[0].LoadedBefore.Seq != 7 || rep.Policies[0].Decisions.Count != 12 {
		t.Errorf("policies %+v", rep.Policies)
	}
	if len(rep.PolicyRejections) != 1 || rep.PolicyRejections[0].Seq != 113 {
		t.Errorf("policy rejections %+v", rep.PolicyRejections)
	}
	if len(rep.Keys) != 2 || rep.Keys[0].Key != "audit-hmac=secret/custos/audit-key@2" || rep.Keys[0].Records.Count != 14 {
		t.Errorf("keys %+v", rep.Keys)
	}
	// A grant used after its last review is unreviewed.
	late := append(trail(), audit.Record{Seq: 115, Time: t0.AddDate(0, 0, 4), Entry: audit.Entry{Action: "resources/read", Outcome: "allow",
		Reason: "break_glass,grant=g1", PurposeOfUse: "ETREAT", Principal: audit.Principal{Sub: "dr-er"}}})
	if r := build(t, late, Inputs{}); r.BreakGlass.Unreviewed != 1 || r.BreakGlass.Grants[0].Reviewed {
		t.Errorf("a use after the review left the grant reviewed: %+v", r.BreakGlass)
	}
	// Records must be one contiguous range.
	b := NewBuilder()
	b.Add(rs[0])
	if err := b.Add(rs[2]); err == nil {
		t.Error("a gap in the records was accepted")
	}
	if _, err := NewBuilder().Build(Inputs{}); err == nil {
		t.Error("a report of no record was built")
	}
}

// TestFiguresTraceToRecords: every figure in report.json names exactly the
// records its rule selects, so an auditor recounting from records.jsonl
// gets the same numbers. The rules are applied here independently of the
// builder, from their text in Rules.
func TestFiguresTraceToRecords(t *testing.T) {
	rs := trail()
	rep := build(t, rs, Inputs{})
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Summary map[string]json.RawMessage
		Days    []struct {
			Date     string
			Seqs     Seqs
			Accesses int
			Outcomes map[string]int `json:"accesses_by_outcome"`
		}
		Patients []struct {
			ID       string
			Accesses Figure
		}
		Rules map[string]string
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	access := []string{"resources/list", "resources/read", "resources/templates/list", "complete", "subscribe", "unsubscribe", "notify"}
	rules := map[string]func(audit.Record) bool{
		"records":  func(audit.Record) bool { return true },
		"accesses": func(r audit.Record) bool { return slices.Contains(access, r.Action) },
		"allowed":  func(r audit.Record) bool { return slices.Contains(access, r.Action) && r.Outcome == "allow" },
		"denials":  func(r audit.Record) bool { return slices.Contains(access, r.Action) && r.Outcome == "deny" },
		"errors":   func(r audit.Record) bool { return slices.Contains(access, r.Action) && r.Outcome == "error" },
		"refusals": func(r audit.Record) bool {
			return r.Action == "auth/reject" || r.Action == "http/rate_limited" || r.Outcome == "error"
		},
		"break_glass_accesses": func(r audit.Record) bool {
			return slices.Contains(access, r.Action) && (r.PurposeOfUse == "ETREAT" || strings.Contains(r.Reason, "break_glass") || strings.Contains(r.Reason, "btg"))
		},
		"grant_events":  func(r audit.Record) bool { return strings.HasPrefix(r.Action, "btg/") },
		"policy_events": func(r audit.Record) bool { return r.Action == "policy/load" || r.Action == "policy/reject" },
	}
	for name, rule := range rules {
		if doc.Rules["summary."+name] == "" {
			t.Errorf("summary.%s has no rule in report.json", name)
		}
		var f Figure
		if err := json.Unmarshal(doc.Summary[name], &f); err != nil {
			t.Fatalf("summary.%s: %v", name, err)
		}
		var want Seqs
		for _, r := range rs {
			if rule(r) {
				want.Add(r.Seq)
			}
		}
		if f.Seqs.String() != want.String() || f.Count != want.Len() {
			t.Errorf("summary.%s = %d %q; its rule selects %q", name, f.Count, f.Seqs.String(), want.String())
		}
	}
	for _, d := range doc.Days {
		n := 0
		d.Seqs.Each(func(q uint64) {
			r := rs[q-101]
			if r.Time.Format(time.DateOnly) != d.Date {
				t.Errorf("day %s names seq %d of %s", d.Date, q, r.Time)
			}
			if rules["accesses"](r) {
				n++
			}
		})
		if n != d.Accesses {
			t.Errorf("day %s: %d accesses, its records hold %d", d.Date, d.Accesses, n)
		}
	}
	for _, p := range doc.Patients {
		p.Accesses.Seqs.Each(func(q uint64) {
			if !slices.Contains(rs[q-101].Patients, p.ID) {
				t.Errorf("patient %s names seq %d, which does not concern them", p.ID, q)
			}
		})
	}
}

// TestHTMLIsSelfContained: one page with inline CSS and SVG, a
// Content-Security-Policy that forbids every fetch, no script, and no
// outside address anywhere in it; the charts hold the data.
func TestHTMLIsSelfContained(t *testing.T) {
	def, err := compliance.Load()
	if err != nil {
		t.Fatal(err)
	}
	rep := build(t, trail(), Inputs{
		Generated: t0.AddDate(0, 0, 5), Tool: "custos test",
		Bundle:       BundleRef{Dir: "bundle", Manifest: bundle.Manifest{Origin: "custos.local/n/audit", From: 101, To: 114, Records: 14}},
		Verification: Verification{Log: LogCheck{OK: true}, Anchors: AnchorCheck{OK: true}, Bundle: &bundle.Transcript{OK: true}},
		Controls:     ControlsFrom(def, nil, ""),
	})
	var buf bytes.Buffer
	if err := rep.WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, bad := range []string{"http://", "https://", "<script", "src=", "href=", "url(", "@import", "<link", "<img", "<iframe"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page contains %q", bad)
		}
	}
	if !strings.Contains(page, `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">`) {
		t.Error("no Content-Security-Policy that forbids fetching")
	}
	for _, id := range []string{"chart-outcome", "chart-purpose", "chart-denials", "chart-breakglass", "chart-months"} {
		if !strings.Contains(page, `<figure id="`+id+`">`) {
			t.Errorf("chart %s missing", id)
		}
	}
	// The first deny bar is the outcome chart's first day: one denied
	// access, and the tooltip names the day's records.
	values := regexp.MustCompile(`data-series="deny" data-value="(\d+)"><title>([^<]*)</title>`).FindAllStringSubmatch(page, -1)
	if len(values) == 0 || values[0][1] != "1" || values[0][2] != "2026-11-20, denied: 1 (records 101-104)" {
		t.Errorf("deny bars %q", values)
	}
	for _, want := range []string{"hk1-p1", "dr-er", "g1", "appropriate", "rev-a", "sha256:b1", "audit-hmac=secret/custos/audit-key@2",
		StatusNotChecked, "How each figure is counted"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(page, ">"+StatusPassed+"<") {
		t.Error("a control is shown as passed without test results")
	}
}

// TestControls: without results nothing is passed; with results a control
// passes only when every test it names passed.
func TestControls(t *testing.T) {
	def, err := compliance.Load()
	if err != nil {
		t.Fatal(err)
	}
	c := ControlsFrom(def, nil, "")
	if c.Checked || c.Passed != 0 || c.NotChecked != len(def.Controls) || len(c.Items) != len(def.Controls) {
		t.Fatalf("unchecked controls %+v", c)
	}
	for _, it := range c.Items {
		if it.Status != StatusNotChecked || len(it.Evidence) == 0 || it.Evidence[0].Result != StatusNotChecked || it.Catalog == "" {
			t.Fatalf("control %+v", it)
		}
	}
	res := compliance.Results{}
	for _, ctl := range def.Controls {
		for _, ref := range ctl.Evidence {
			res[ref] = compliance.StatusPass
		}
	}
	victim := def.Controls[0]
	res[victim.Evidence[0]] = compliance.StatusSkip
	c = ControlsFrom(def, res, "test-results.json")
	if !c.Checked || c.Failed < 1 || c.Passed+c.Failed != len(def.Controls) || c.Items[0].Status != StatusFailed || c.Items[0].Evidence[0].Result != "skip" {
		t.Fatalf("checked controls: passed %d failed %d, first %+v", c.Passed, c.Failed, c.Items[0])
	}
	if c.Items[1].Status != StatusPassed && !slices.Contains(def.Controls[1].Evidence, victim.Evidence[0]) {
		t.Errorf("second control %+v", c.Items[1])
	}
}

// TestRetention: months, the records past retention, and the proof that
// nothing was deleted failing on a gap, a short tree or inconsistent anchors.
func TestRetention(t *testing.T) {
	now := time.Date(2032, 12, 1, 0, 0, 0, 0, time.UTC)
	period := 52596 * time.Hour
	cutoff := now.Add(-period)
	scan := NewLogScan(cutoff)
	times := []time.Time{
		time.Date(2026, 10, 30, 0, 0, 0, 0, time.UTC), time.Date(2026, 10, 31, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	for i, tm := range times {
		r := audit.Record{Seq: uint64(i + 1), Time: tm, Entry: audit.Entry{Action: "resources/read"}}
		if i == 2 {
			r.Action, r.PolicyRevision = "policy/load", "rev-b bundle=sha256:cc"
		}
		scan.Add(r)
	}
	ret := scan.Retention(period, now, 4, 4, true)
	if ret.PeriodText != "6 years" || !ret.NothingDeleted.OK || ret.Oldest.Seq != 1 || ret.Newest.Seq != 4 ||
		ret.PastRetention.Seqs.String() != "1-2" || len(ret.Months) != 3 || ret.Months[0].Seqs.String() != "1-2" || ret.Months[1].Month != "2026-12" {
		t.Fatalf("retention %+v", ret)
	}
	if l := scan.PolicyLoads(); len(l) != 1 || l[0].Revision != "rev-b" || l[0].Bundle != "sha256:cc" {
		t.Errorf("policy loads %+v", l)
	}
	if r := scan.Retention(period, now, 5, 4, true); r.NothingDeleted.OK || r.NothingDeleted.GaplessFromOne || r.NothingDeleted.TreeSizeEqualsHead {
		t.Errorf("head 5 with records to 4 and tree 4: %+v", r.NothingDeleted)
	}
	if r := scan.Retention(period, now, 4, 4, false); r.NothingDeleted.OK {
		t.Error("inconsistent anchors passed")
	}
	gap := NewLogScan(cutoff)
	gap.Add(audit.Record{Seq: 1, Time: times[0]})
	gap.Add(audit.Record{Seq: 3, Time: times[1]})
	if r := gap.Retention(period, now, 3, 3, true); r.NothingDeleted.GaplessFromOne {
		t.Error("a gap passed")
	}
	for d, want := range map[time.Duration]string{period: "6 years", 8766 * time.Hour: "1 year", 36 * time.Hour: "1.5 days", 24 * time.Hour: "1 day"} {
		if got := DurationText(d); got != want {
			t.Errorf("DurationText(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestChartBuckets: a long period is drawn per week or month, empty
// buckets included, and the bars add up to the days.
func TestChartBuckets(t *testing.T) {
	days := []Day{
		{Date: "2026-01-05", Outcomes: map[string]int{"allow": 2}},
		{Date: "2026-01-06", Outcomes: map[string]int{"allow": 1, "deny": 1}},
		{Date: "2026-04-20", Outcomes: map[string]int{"deny": 3}},
	}
	for i := range days {
		days[i].Seqs.Add(uint64(i*10 + 1))
	}
	bks, gran := dayBuckets(days, func(d Day) map[string]int { return d.Outcomes })
	if gran != "week" || len(bks) != 16 || bks[0].Label != "week of 2026-01-05" || bks[0].Values["allow"] != 3 || bks[0].Seqs.String() != "1,11" || bks[15].Values["deny"] != 3 {
		t.Fatalf("%s buckets %+v", gran, bks)
	}
	c := stacked("x", "t", "c", bks, []series{{"allow", "allowed", colorAllow}, {"deny", "denied", colorDeny}})
	if c.Total != 7 || len(c.Bars) != 16 || len(c.XLabels) > 10 {
		t.Fatalf("chart total %d bars %d labels %d", c.Total, len(c.Bars), len(c.XLabels))
	}
	for _, s := range c.Bars[15].Segs {
		if s.Y < c.PlotY || s.Y+s.H > c.PlotBottom+0.1 {
			t.Errorf("segment outside the plot: %+v", s)
		}
	}
	if _, g := dayBuckets([]Day{{Date: "2020-01-01"}, {Date: "2026-01-01"}}, func(Day) map[string]int { return nil }); g != "month" {
		t.Errorf("six years drawn per %s", g)
	}
}

func TestNiceMax(t *testing.T) {
	for m, want := range map[int]int{0: 4, 3: 4, 5: 8, 15: 20, 21: 40, 100: 100, 101: 200, 4001: 8000} {
		if got := niceMax(m); got != want || got%4 != 0 {
			t.Errorf("niceMax(%d) = %d, want %d", m, got, want)
		}
	}
}

// TestPolicyImpactIsNoPolicyEvent: an auditor's policy/impact replay is
// an access record; policy_events counts the loads and rejections only.
func TestPolicyImpactIsNoPolicyEvent(t *testing.T) {
	rs := trail()
	last := rs[len(rs)-1]
	impact := last
	impact.Seq, impact.Time = last.Seq+1, last.Time.Add(time.Minute)
	impact.Action, impact.Outcome, impact.Reason, impact.Patients = "policy/impact", "allow", "candidate=sha256:cc", nil
	impact.Principal = audit.Principal{Sub: "auditor"}
	rep := build(t, append(rs, impact), Inputs{Generated: t0.AddDate(0, 0, 5), Tool: "custos test"})
	if got := rep.Summary.PolicyEvents; got.Count != 2 || got.Seqs.String() != "101,113" {
		t.Errorf("policy_events = %+v, want the load 101 and the rejection 113", got)
	}
}

// TestHTMLShowsRecordTextAsPrintable: a principal, a client or a reason may
// hold bidi overrides, zero-width or control characters (a token issuer, an
// OAuth client or a policy error wrote them). The page an auditor opens
// shows them escaped (\u202e), never raw: a user named "dr-\u202eada" does
// not display as another name, and no control character reaches the page.
func TestHTMLShowsRecordTextAsPrintable(t *testing.T) {
	rs := trail()
	for _, i := range []int{2, 3, 5} { // an allowed read, a denial and a break-glass denial
		rs[i].Principal.Sub += "\u202eada"
		rs[i].Principal.ClientID = "cl\u200b\x1b[2Jient"
		rs[i].Reason += "\u2066\x07"
	}
	rep := build(t, rs, Inputs{Generated: t0.AddDate(0, 0, 5), Tool: "custos test"})
	var buf bytes.Buffer
	if err := rep.WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if !utf8.ValidString(page) {
		t.Errorf("the output is not UTF-8: %q", page)
	}
	for i, r := range []rune(page) {
		if r != '\n' && !unicode.IsPrint(r) {
			t.Fatalf("the page holds %U at rune %d: %q", r, i, page[max(0, i-80):min(len(page), i+80)])
		}
	}
	if !strings.Contains(page, `dr-a\u202eada`) {
		t.Error("the user's name is not shown with its override escaped")
	}
}

// TestGrantEventStaysWithItsGrant: a btg/* record's reason is written by
// btg.Event.AuditReason with the grant id first and the grantee verbatim
// after it. A grantee name holding " grant=<another id>" (possible before
// 'custos btg grant' refused spaces in --sub) must not move the record to
// that other grant: the report would show the real grant without its
// grant event and a grant that was never made.
func TestGrantEventStaysWithItsGrant(t *testing.T) {
	ev := btg.Event{Kind: btg.KindGrant, GrantID: "real-id", Sub: "dr-er grant=other-id ttl=1s",
		Expires: t0.Add(time.Hour), TTL: time.Hour, Text: "unconscious patient"}
	rec := audit.Record{Seq: 1, Time: t0, Entry: audit.Entry{Action: "btg/grant", Outcome: audit.OutcomeAllow,
		Reason: ev.AuditReason(), Principal: audit.Principal{Sub: "op"}, PurposeOfUse: "ETREAT", Patients: []string{"hk1-p1"}}}
	rep := build(t, []audit.Record{rec}, Inputs{})
	if len(rep.BreakGlass.Grants) != 1 {
		t.Fatalf("one grant event made grants %+v", rep.BreakGlass.Grants)
	}
	g := rep.BreakGlass.Grants[0]
	if g.ID != "real-id" || g.Granted == nil || g.Granted.Seq != 1 || g.TTL != "1h0m0s" {
		t.Errorf("the grant record %q was read as %+v", rec.Reason, g)
	}
}

// TestHTMLKeepsHostileRecordTextText: every text of the records that comes
// from outside custos (users, clients, purposes, reasons, patients' lookup
// values, policy revisions and bundle digests, key names, grant fields, the
// origin, verification problems) is built to end its context and run
// script. Tokenized as a browser would, the page holds only the elements
// and attributes the template writes, with no handler or address, and each
// hostile text is there as text.
func TestHTMLKeepsHostileRecordTextText(t *testing.T) {
	h := `</td></table></script><script>alert(1)</script><img src=x onerror=alert(2)>"'--><!--<a href="javascript:alert(3)">` +
		"\u2028\u2029" + `]]></title><svg onload=alert(4)><style>*{}</style>`
	rs := trail()
	for i := range rs {
		rs[i].Principal.Sub += h
		rs[i].Principal.ClientID = h
		rs[i].PurposeOfUse += h
		rs[i].Reason += " " + h
		rs[i].PolicyRevision += h
		rs[i].Keys = append(rs[i].Keys, "k="+h)
		for j := range rs[i].Patients {
			rs[i].Patients[j] += h
		}
	}
	rs[6].Reason = `grant=g1 grantee=dr-er` + h + ` expires=` + h + ` ttl=` + h + ` reason="x"`
	rep := build(t, rs, Inputs{Tool: h, Bundle: BundleRef{Manifest: bundle.Manifest{Origin: h}},
		Verification: Verification{Log: LogCheck{Problems: []string{h}}, Anchors: AnchorCheck{Error: h}}})
	var buf bytes.Buffer
	if err := rep.WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	allowed := map[string][]string{
		"html": {"lang"}, "meta": {"charset", "http-equiv", "content", "name"}, "figure": {"id"}, "section": {"id"}, "div": {"class", "id"},
		"svg": {"class", "viewbox", "role", "aria-label", "data-total"}, "g": {"class", "data-label", "data-total"},
		"rect": {"x", "y", "width", "height", "fill", "data-series", "data-value"}, "line": {"x1", "x2", "y1", "y2", "stroke"},
		"text": {"class", "x", "y", "dx", "dy", "text-anchor"}, "td": {"class", "colspan"}, "th": {"class"}, "span": {"class"},
		"li": {"class"}, "p": {"class"},
	}
	plain := []string{"head", "title", "style", "body", "main", "header", "h1", "h2", "h3", "nav", "ol", "ul", "table", "thead", "tbody",
		"tr", "code", "i", "b", "br", "pre", "figcaption"}
	var text strings.Builder
	z := html.NewTokenizer(&buf)
	for tt := z.Next(); tt != html.ErrorToken; tt = z.Next() {
		tok := z.Token()
		switch tt {
		case html.StartTagToken, html.SelfClosingTagToken:
			attrs, ok := allowed[tok.Data]
			if !ok && !slices.Contains(plain, tok.Data) {
				t.Errorf("the page holds an element <%s> %v", tok.Data, tok.Attr)
			}
			for _, a := range tok.Attr {
				if !slices.Contains(attrs, a.Key) {
					t.Errorf("<%s> has an attribute %s=%q", tok.Data, a.Key, a.Val)
				}
			}
		case html.TextToken:
			text.WriteString(tok.Data)
		case html.CommentToken:
			t.Errorf("the page holds a comment %q", tok.Data)
		}
	}
	if n := strings.Count(text.String(), audit.Printable(h)); n < 20 {
		t.Errorf("the hostile text shows as text %d times; the records hold it in many more places", n)
	}
}

// TestReviewCoversOnlyTheUsesItSaw: the privacy officer signs a grant off
// after one use; a second use comes before the server writes the review to
// the log. The records then show both uses before the btg/review record,
// whose uses=1 says what the reviewer saw: the grant is not reviewed, as
// 'custos btg review' (grants.db) says too.
func TestReviewCoversOnlyTheUsesItSaw(t *testing.T) {
	rs := trail()
	rs[11].Reason = `grant=g1 grantee=dr-er verdict=appropriate uses=1 note="documented emergency"`
	rep := build(t, rs, Inputs{})
	if g := rep.BreakGlass.Grants[0]; g.Reviewed || rep.BreakGlass.Unreviewed != 1 {
		t.Errorf("a review of 1 use covers a grant with %d uses: reviewed %v, %d unreviewed", len(g.Uses), g.Reviewed, rep.BreakGlass.Unreviewed)
	}
	// Granted before the period: the uses before it are not in the bundle,
	// so the count cannot be compared and the time rule alone decides.
	if rep := build(t, rs[7:], Inputs{}); !rep.BreakGlass.Grants[0].Reviewed {
		t.Errorf("a grant made before the period, reviewed after its last use, is shown unreviewed: %+v", rep.BreakGlass.Grants[0])
	}
	if rep := build(t, trail(), Inputs{}); !rep.BreakGlass.Grants[0].Reviewed {
		t.Error("a review of both uses does not cover the grant")
	}
}

// TestGrantRefusedAndExpiredAsRecorded: a grant the server refused
// (btg/refuse: it broke the rules in force) shows as refused, never in
// effect; a grant made before the period and expiring in it keeps the
// expiry and TTL its btg/expire record carries.
func TestGrantRefusedAndExpiredAsRecorded(t *testing.T) {
	rec := func(seq uint64, kind string, ev btg.Event) audit.Record {
		ev.Kind, ev.Sub = kind, "dr-er"
		return audit.Record{Seq: seq, Time: t0.Add(time.Duration(seq) * time.Minute), Entry: audit.Entry{Action: kind, Outcome: audit.OutcomeAllow,
			Reason: ev.AuditReason(), Principal: audit.Principal{Sub: "custos"}, PurposeOfUse: "ETREAT", Patients: []string{"hk1-p1"}}}
	}
	rs := []audit.Record{
		rec(1, btg.KindGrant, btg.Event{GrantID: "g-long", Expires: t0.Add(30 * time.Hour), TTL: 30 * time.Hour, ByRole: "ops", Text: "a long emergency"}),
		rec(2, btg.KindRefuse, btg.Event{GrantID: "g-long", Expires: t0.Add(30 * time.Hour), TTL: 30 * time.Hour, ByRole: "ops",
			Refused: btg.RefusedTTL, MaxTTL: 4 * time.Hour}),
		rec(3, btg.KindExpire, btg.Event{GrantID: "g-old", Expires: t0.Add(3 * time.Minute), TTL: 4 * time.Hour, Uses: 2}),
	}
	rep := build(t, rs, Inputs{})
	var js, page bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		BreakGlass struct {
			Grants []map[string]any
		} `json:"break_glass"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	grants := map[string]map[string]any{}
	for _, g := range doc.BreakGlass.Grants {
		grants[g["id"].(string)] = g
	}
	if g := grants["g-long"]; g["refused_code"] != btg.RefusedTTL || g["refused"] == nil {
		t.Errorf("the refused grant reads %v", g)
	}
	if g := grants["g-old"]; g["ttl"] != "4h0m0s" || g["expires"] != t0.Add(3*time.Minute).Format(time.RFC3339) || g["granted"] != nil {
		t.Errorf("the grant expiring in the period reads %v", g)
	}
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), "refused by the server (ttl_over_cap), seq 2: never in effect") {
		t.Error("the page does not say the grant was refused")
	}
}

// TestPatientsAcrossAuditKeyRotation: the audit key is rotated during the
// period, so one patient's accesses carry two lookup values (one per key
// version). The report names the key version of each lookup value, lists
// the versions, and says on the page that its count of patients is a count
// of lookup values, so an auditor does not take one patient for two.
func TestPatientsAcrossAuditKeyRotation(t *testing.T) {
	rs := trail()
	for i := 10; i < len(rs); i++ { // the key is rotated before the error read
		rs[i].Keys = []string{"audit-hmac=secret/custos/audit-key@3", "cursor=secret/custos/cursor-key@1"}
		for j, p := range rs[i].Patients {
			rs[i].Patients[j] = p + "-v3"
		}
	}
	rep := build(t, rs, Inputs{Generated: t0.AddDate(0, 0, 5), Tool: "custos test"})
	var js, page bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Summary struct {
			Patients    int
			PatientKeys []string `json:"patient_keys"`
		}
		Patients []struct {
			ID   string
			Keys []string
		}
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	v2, v3 := "audit-hmac=secret/custos/audit-key@2", "audit-hmac=secret/custos/audit-key@3"
	if !slices.Equal(doc.Summary.PatientKeys, []string{v2, v3}) {
		t.Errorf("summary.patient_keys = %q", doc.Summary.PatientKeys)
	}
	for _, p := range doc.Patients {
		want := v2
		if strings.HasSuffix(p.ID, "-v3") {
			want = v3
		}
		if !slices.Equal(p.Keys, []string{want}) {
			t.Errorf("patient %s: keys %q, want %s", p.ID, p.Keys, want)
		}
	}
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), "The audit key was rotated during the period") ||
		!strings.Contains(page.String(), "under 2 audit-key versions") {
		t.Error("the page does not say its patients are counted per key version")
	}
	// One version: no warning.
	page.Reset()
	if err := build(t, trail(), Inputs{}).WriteHTML(&page); err != nil || strings.Contains(page.String(), "was rotated") {
		t.Errorf("a period under one key version warns of a rotation (%v)", err)
	}
}

// TestAggregateRefusalsCountTheirRequests: an aggregate refusal record
// (docs/audit-format.md, "Aggregate refusal records") stands for the
// count=N refusals of its reason, not for one. The report's summary says
// how many requests its refusal records stand for, each aggregate row
// carries its N, and the page shows the requests beside the records.
// Probing a log written by `custos serve --dev` found "5 refusals and
// errors" on the page for 9 refused requests (two aggregates of count=3):
// a brute force of 1,931 bad tokens in a minute showed as 2.
func TestAggregateRefusalsCountTheirRequests(t *testing.T) {
	rs := trail() // refusals: one auth/reject (105), one error (111)
	last := rs[len(rs)-1]
	add := func(action, outcome, reason string, sub string) {
		r := last
		r.Seq, r.Time = rs[len(rs)-1].Seq+1, rs[len(rs)-1].Time.Add(time.Minute)
		r.Action, r.Outcome, r.Reason, r.Patients = action, outcome, reason, nil
		r.Principal = audit.Principal{Sub: sub}
		rs = append(rs, r)
	}
	add("auth/reject", "deny", "http_401,invalid_token,aggregate,count=1931,window=2026-11-23T10:00:00Z/2026-11-23T10:01:00Z", "")
	add("http/rate_limited", "deny", "http_429,rate_limited,aggregate,count=9,window=2026-11-23T10:00:00Z/2026-11-23T10:01:00Z", "dr-a")
	// A policy error's text that looks like an aggregate is one request.
	add("resources/read", "error", "policy_error,aggregate,count=500,window=2026-11-23T10:00:00Z/2026-11-23T10:01:00Z", "dr-a")
	rep := build(t, rs, Inputs{Generated: t0.AddDate(0, 0, 5), Tool: "custos test"})
	if got := rep.Summary.Refusals.Count; got != 5 {
		t.Fatalf("summary.refusals counts %d records, want 5", got)
	}
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Summary struct {
			RefusedRequests *int64 `json:"refused_requests"`
		}
		Refusals []struct {
			Seq   uint64
			Count *int64 `json:"count"`
		}
		Rules map[string]string
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Summary.RefusedRequests == nil || *doc.Summary.RefusedRequests != 1+1+1931+9+1 {
		t.Errorf("summary.refused_requests = %v, want 1943: the refusal records stand for 1+1+1931+9+1 requests", doc.Summary.RefusedRequests)
	}
	if doc.Rules["summary.refused_requests"] == "" {
		t.Error("summary.refused_requests has no rule in report.json")
	}
	want := map[uint64]int64{115: 1931, 116: 9}
	for _, e := range doc.Refusals {
		switch {
		case want[e.Seq] != 0 && (e.Count == nil || *e.Count != want[e.Seq]):
			t.Errorf("refusal row %d: count %v, want %d", e.Seq, e.Count, want[e.Seq])
		case want[e.Seq] == 0 && e.Count != nil:
			t.Errorf("refusal row %d (one request): count %d, want none", e.Seq, *e.Count)
		}
	}
	var perDay int64
	for _, d := range rep.Days {
		perDay += d.RefusedRequests
	}
	if perDay != 1943 {
		t.Errorf("days[].refused_requests add up to %d, want 1943", perDay)
	}
	var page bytes.Buffer
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), `<div class="n">1943</div>`) {
		t.Error("the page does not show the 1943 requests the refusal records stand for")
	}
}

// TestGrantActorsAreAccountsWithClaims: a btg/revoke or btg/review
// record's principal is the OS account that acted; whom it named
// (claimed_by=, 'btg revoke --by', 'btg review --reviewer') is shown
// beside it as a claim, never in its place.
func TestGrantActorsAreAccountsWithClaims(t *testing.T) {
	rec := func(seq uint64, account string, ev btg.Event) audit.Record {
		ev.GrantID, ev.Sub, ev.Tenant = "g1", "dr-er", "general-hospital"
		return audit.Record{Seq: seq, Time: t0.Add(time.Duration(seq) * time.Minute), Entry: audit.Entry{Action: ev.Kind, Outcome: audit.OutcomeAllow,
			Reason: ev.AuditReason(), Principal: audit.Principal{Sub: account}, PurposeOfUse: "ETREAT", Patients: []string{"hk1-p1"}}}
	}
	rep := build(t, []audit.Record{
		rec(1, "alice", btg.Event{Kind: btg.KindRevoke, Claimed: "op night", Text: "transferred"}),
		rec(2, "bob", btg.Event{Kind: btg.KindReview, Claimed: "privacy-officer", Verdict: "appropriate", Uses: 0, Text: "ok"}),
	}, Inputs{})
	g := rep.BreakGlass.Grants[0]
	if g.RevokedBy != "alice" || g.RevokedByClaimed != "op night" || len(g.Reviews) != 1 ||
		g.Reviews[0].Reviewer != "bob" || g.Reviews[0].Claimed != "privacy-officer" {
		t.Errorf("grant %+v", g)
	}
	// A tenant edited into grants.db to carry a claim is the tenant, and
	// the revocation claims nothing.
	edited := rec(1, "alice", btg.Event{Kind: btg.KindRevoke, Text: "transferred"})
	edited.Reason = btg.Event{Kind: btg.KindRevoke, GrantID: "g1", Sub: "dr-er", Tenant: `a claimed_by="privacy-officer"`, Text: "transferred"}.AuditReason()
	if g := build(t, []audit.Record{edited}, Inputs{}).BreakGlass.Grants[0]; g.RevokedByClaimed != "" || g.Tenant != `a claimed_by="privacy-officer"` {
		t.Errorf("a tenant passed for a claim: %q read as %+v", edited.Reason, g)
	}
}

// tenantTrail: two grants to one grantee for patient "p1" of tenants a
// and b (one lookup value: pseudonyms are not per tenant, and p1 of a and
// p1 of b are two people), a read under each in its own tenant, a read of
// tenant b naming a's grant, and a completion naming a's grant without a
// URI.
func tenantTrail() []audit.Record {
	rec := func(action, reason, sub string, uris ...string) audit.Record {
		return audit.Record{Entry: audit.Entry{Action: action, Outcome: "allow", Reason: reason, Principal: audit.Principal{Sub: sub},
			PurposeOfUse: "ETREAT", Patients: []string{"hk1-p1"}, URIs: uris}}
	}
	rs := []audit.Record{
		rec("btg/grant", `grant=g-a grantee=dr-er tenant=a expires=2026-11-20T13:00:00Z ttl=4h0m0s reason="unconscious"`, "op"),
		rec("btg/grant", `grant=g-b grantee=dr-er tenant=b expires=2026-11-20T13:00:00Z ttl=4h0m0s reason="unconscious"`, "op"),
		rec("resources/read", "break_glass,grant=g-a", "dr-er", "fhir://a/patients/hk1-p1/observation/o1"),
		rec("resources/read", "break_glass,grant=g-b", "dr-er", "fhir://b/patients/hk1-p1/observation/o2"),
		rec("resources/read", "break_glass,grant=g-a", "dr-er", "fhir://b/patients/hk1-p1/observation/o3"),
		rec("complete", "argument=type returned=1 denied=0 scanned=1 grant=g-a", "dr-er"),
	}
	for i := range rs {
		rs[i].Seq, rs[i].Time = uint64(1+i), t0.Add(time.Duration(i)*time.Minute)
	}
	return rs
}

// TestGrantsAreTheirTenants: the report tells grants of different tenants
// apart (each names its tenant) and counts an access as a use of the grant
// it names only in that grant's tenant: a read of tenant b naming tenant
// a's grant is listed apart (other_tenant), not as a use; an access with
// no URI counts. The cross-check flags a grants.db whose tenant differs
// from the records'. The report ignored tenant=: both grants read alike,
// and the read of b counted as a use of a's grant.
func TestGrantsAreTheirTenants(t *testing.T) {
	rep := build(t, tenantTrail(), Inputs{Grants: []GrantFileEntry{
		{ID: "g-a", Grantee: "dr-er", Tenant: "b", Created: t0, Expires: t0.Add(4 * time.Hour), Uses: 3},
		{ID: "g-b", Grantee: "dr-er", Tenant: "b", Created: t0, Expires: t0.Add(4 * time.Hour), Uses: 1},
	}})
	gs := map[string]Grant{}
	for _, g := range rep.BreakGlass.Grants {
		gs[g.ID] = g
	}
	seqs := func(us []Use) (out []uint64) {
		for _, u := range us {
			out = append(out, u.Seq)
		}
		return out
	}
	if a, b := gs["g-a"], gs["g-b"]; a.Tenant != "a" || b.Tenant != "b" ||
		!slices.Equal(seqs(a.Uses), []uint64{3, 6}) || !slices.Equal(seqs(a.OtherTenant), []uint64{5}) ||
		!slices.Equal(seqs(b.Uses), []uint64{4}) || len(b.OtherTenant) != 0 || a.UseSeqs.String() != "3,6" {
		t.Errorf("grants:\n a %+v\n b %+v", a, b)
	}
	if got := rep.BreakGlass.OtherTenant; got.Count != 1 || got.Seqs.String() != "5" {
		t.Errorf("other_tenant = %+v, want record 5", got)
	}
	rows := map[string]GrantFileRow{}
	for _, r := range rep.BreakGlass.GrantsFile.Grants {
		rows[r.ID] = r
	}
	if a, b := rows["g-a"], rows["g-b"]; !a.TenantMismatch || !a.Mismatch || a.RecordTenant != "a" || b.TenantMismatch || b.Mismatch ||
		rep.BreakGlass.GrantsFile.Mismatches != 1 {
		t.Errorf("cross-check: a %+v, b %+v, mismatches %d", a, b, rep.BreakGlass.GrantsFile.Mismatches)
	}
	var html bytes.Buffer
	if err := rep.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"named a grant of another tenant", "(records: a)", "seq 5 (b)"} {
		if !strings.Contains(html.String(), want) {
			t.Errorf("report.html does not say %q", want)
		}
	}
}

// TestPatientsArePerTenant: a patient is a lookup value in a tenant. p1 of
// tenant a and p1 of tenant b share the lookup value (audit.Pseudonym
// hashes the id alone) and are two people: the report's patients[] has a
// row for each, with its own counts and users, and a user's patients
// count both. The records are written to and read back from a real log.
// Before, the two were one row: 4 accesses by 3 users.
func TestPatientsArePerTenant(t *testing.T) {
	const p1 = "hk1-0123456789abcdef0123456789abcdef"
	es := []audit.Entry{
		{Principal: audit.Principal{Sub: "dr-a"}, URIs: []string{"fhir://a/patients/" + p1 + "/patient/" + p1}},
		{Principal: audit.Principal{Sub: "dr-b"}, URIs: []string{"note://b/patients/" + p1 + "/notes/n1"}},
		{Principal: audit.Principal{Sub: "dr-x"}, URIs: []string{"fhir://a/patients/" + p1 + "/observation/o1", "fhir://b/patients/" + p1 + "/observation/o2"}},
		{Principal: audit.Principal{Sub: "dr-a"}, URIs: []string{"fhir://a/patients/" + p1 + "/observation/o1"}, Outcome: audit.OutcomeDeny},
	}
	for i := range es {
		es[i].Action, es[i].Patients = audit.ActionResourcesRead, []string{p1}
	}
	rep := build(t, logged(t, es), Inputs{})
	type row struct {
		Tenant, ID     string
		Accesses       string
		Users, Allowed int
	}
	var got []row
	for _, s := range rep.Patients {
		got = append(got, row{s.Tenant, s.ID, s.Accesses.Seqs.String(), s.Users, s.Allowed})
	}
	want := []row{{"a", p1, "1,3-4", 2, 2}, {"b", p1, "2-3", 2, 2}}
	if !slices.Equal(got, want) || rep.Summary.Patients != 2 {
		t.Errorf("patients %+v (summary %d),\nwant %+v (2)", got, rep.Summary.Patients, want)
	}
	for _, u := range rep.Users {
		if u.ID == "dr-x" && u.Patients != 2 {
			t.Errorf("dr-x read 2 patients (p1 of a and of b), report says %d", u.Patients)
		}
	}
	var page bytes.Buffer
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), "<td>a</td><td class=\"mono\">"+p1) || !strings.Contains(page.String(), "<td>b</td><td class=\"mono\">"+p1) {
		t.Error("the page's patients table does not name each row's tenant")
	}
}

// TestPatientsNamedInNoURICountOnce: a record that names a patient's
// lookup value in no URI (a completion of an argument other than id) has
// its own row, of no tenant, but it is no further patient when the
// lookup value is named in a tenant too: the summary's patients and a
// user's patients count the patient once. Before, one patient read in
// tenant a and named by a completion was two patients (summary 2, dr-c's
// patients 2).
func TestPatientsNamedInNoURICountOnce(t *testing.T) {
	const p1, p2 = "hk1-0123456789abcdef0123456789abcdef", "hk1-fedcba9876543210fedcba9876543210"
	rep := build(t, logged(t, []audit.Entry{
		{Action: audit.ActionResourcesRead, Principal: audit.Principal{Sub: "dr-c"}, URIs: []string{"fhir://a/patients/" + p1 + "/patient/" + p1}, Patients: []string{p1}},
		{Action: "complete", Principal: audit.Principal{Sub: "dr-c"}, URIs: []string{}, Patients: []string{p1}},
		{Action: "complete", Principal: audit.Principal{Sub: "dr-d"}, URIs: []string{}, Patients: []string{p2}},
	}), Inputs{})
	if len(rep.Patients) != 3 {
		t.Errorf("patients[] has %d rows, want 3 (p1 of a, p1 of no tenant, p2 of no tenant)", len(rep.Patients))
	}
	if rep.Summary.Patients != 2 {
		t.Errorf("summary.patients %d, want 2 (p1, named in tenant a and by a completion, once; p2)", rep.Summary.Patients)
	}
	for _, u := range rep.Users {
		if u.ID == "dr-c" && u.Patients != 1 {
			t.Errorf("dr-c read and completed one patient, report says %d", u.Patients)
		}
	}
}

// logged appends es (outcome allow unless set, reason "r", purpose TREAT)
// to a real log and returns the records read back from it.
func logged(t *testing.T, es []audit.Entry) []audit.Record {
	t.Helper()
	l, _ := audittest.Open(t, audit.Options{Node: "n1"})
	ctx := context.Background()
	for _, e := range es {
		e.Outcome, e.Reason, e.PurposeOfUse = cmp.Or(e.Outcome, audit.OutcomeAllow), "r", "TREAT"
		if _, err := l.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	var rs []audit.Record
	err := l.Records(ctx, 1, uint64(len(es)), func(_ uint64, c []byte) error {
		r, err := audit.Decode(c)
		rs = append(rs, r)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}
