package bundle

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/e2e/validators"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// aggregateEntries are refusal records as a real server writes them
// (server/refusals.go; taken from a log written by `custos serve --dev`
// under a token flood, a cross-origin request and a rate limit): the
// first refusal of a kind on its own, the rest counted in one aggregate
// record whose reason ends ",aggregate,count=N,window=START/END"; and
// records whose reason only looks like one.
func aggregateEntries() []audit.Entry {
	clin := audit.Principal{Sub: "demo-clinician", Roles: []string{"clinician"}, ClientID: "demo-assistant"}
	none := audit.Principal{Roles: []string{}}
	keys := []string{"audit-hmac=dev:file", "cursor=dev:ephemeral", "signing=dev:file"}
	e := func(action, outcome, reason string, p audit.Principal, source string) audit.Entry {
		return audit.Entry{Action: action, Outcome: outcome, Reason: reason, Principal: p, Source: source, Keys: keys}
	}
	return []audit.Entry{
		e("auth/reject", audit.OutcomeDeny, "http_401,invalid_token", none, "127.0.0.1:60866"),
		e("auth/reject", audit.OutcomeDeny, "http_401,invalid_token,aggregate,count=300,window=2026-12-05T13:12:53Z/2026-12-05T13:13:58Z", none, "127.0.0.1"),
		e("auth/reject", audit.OutcomeDeny, "http_403,cross_origin,aggregate,count=1,window=2026-12-05T13:12:53Z/2026-12-05T13:13:58Z", clin, "127.0.0.1"),
		e("http/rate_limited", audit.OutcomeDeny, "http_429,rate_limited", clin, "127.0.0.1:56724"),
		e("http/rate_limited", audit.OutcomeDeny, "http_429,rate_limited,aggregate,count=9,window=2026-12-05T13:16:25Z/2026-12-05T13:16:28Z", clin, "127.0.0.1"),
		e("http/rate_limited", audit.OutcomeDeny, "http_429,session_limit,aggregate,count=4096,window=2026-12-05T13:16:25Z/2026-12-05T13:17:25Z", none, "other"),
		e(audit.ActionResourcesRead, audit.OutcomeError, "disk_low,aggregate,count=12,window=2026-12-05T13:16:00Z/2026-12-05T13:17:00Z", clin, "[2001:db8::7]"),
		// Not aggregates: malformed suffixes, an allow.
		e("policy/reject", audit.OutcomeDeny, "candidate=sha256:aa policy: x,aggregate,count=5,window=yesterday/today", audit.Principal{Sub: "custos"}, "dir:/etc/custos/policy"),
		e("auth/reject", audit.OutcomeDeny, "http_401,no_token,aggregate,count=-1,window=2026-12-05T13:12:53Z/2026-12-05T13:13:58Z", none, "127.0.0.1"),
		e("auth/reject", audit.OutcomeDeny, "http_401,no_token,aggregate,count=3,window=2026-12-05T13:13:58Z/2026-12-05T13:12:53Z", none, "127.0.0.1"),
		e("policy/reject", audit.OutcomeDeny, "candidate=sha256:bb policy: x,aggregate,count=5,window=2026-12-05T13:12:53Z/2026-12-05T13:13:58Z", audit.Principal{Sub: "custos"}, "dir:/etc/custos/policy"),
		e(audit.ActionResourcesRead, audit.OutcomeError, "policy_error,aggregate,count=5,window=2026-12-05T13:12:53Z/2026-12-05T13:13:58Z", clin, "stdio"),
		e("complete", audit.OutcomeAllow, "argument=id,aggregate,count=2,window=2026-12-05T13:12:53Z/2026-12-05T13:13:58Z", clin, "127.0.0.1:1"),
	}
}

// wantAggregate is what the test expects of entry i of aggregateEntries:
// the count and window of an aggregate record, or count 0.
func wantAggregate(reason string) (count int64, start, end string) {
	for _, w := range []struct {
		reason     string
		count      int64
		start, end string
	}{
		{"http_401,invalid_token,aggregate,count=300,window=2026-12-05T13:12:53Z/2026-12-05T13:13:58Z", 300, "2026-12-05T13:12:53Z", "2026-12-05T13:13:58Z"},
		{"http_403,cross_origin,aggregate,count=1,window=2026-12-05T13:12:53Z/2026-12-05T13:13:58Z", 1, "2026-12-05T13:12:53Z", "2026-12-05T13:13:58Z"},
		{"http_429,rate_limited,aggregate,count=9,window=2026-12-05T13:16:25Z/2026-12-05T13:16:28Z", 9, "2026-12-05T13:16:25Z", "2026-12-05T13:16:28Z"},
		{"http_429,session_limit,aggregate,count=4096,window=2026-12-05T13:16:25Z/2026-12-05T13:17:25Z", 4096, "2026-12-05T13:16:25Z", "2026-12-05T13:17:25Z"},
		{"disk_low,aggregate,count=12,window=2026-12-05T13:16:00Z/2026-12-05T13:17:00Z", 12, "2026-12-05T13:16:00Z", "2026-12-05T13:17:00Z"},
	} {
		if w.reason == reason {
			return w.count, w.start, w.end
		}
	}
	return 0, "", ""
}

func unixMilli(t *testing.T, s string) int64 {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v.UnixMilli()
}

// TestAggregateRefusalsCarryTheirCount: an aggregate refusal record
// stands for N refusals in a window, not one. Its OCSF event says so with
// OCSF's own attributes (count = N, start_time and end_time = the window,
// in Unix milliseconds), so that a SIEM summing failed authentications
// counts 300 where the server refused 300 (before: 1, the count only in
// status_detail's text); its AuditEvents carry the window as period and
// N in the custos extension. Records that are not aggregates, or whose
// reason only imitates one, carry neither. Every event still passes the
// OCSF 1.3.0 schema and both outside FHIR validators.
func TestAggregateRefusalsCarryTheirCount(t *testing.T) {
	dir, records := exportEntries(t, "demo", aggregateEntries())

	schema := compileOCSFSchema(t)
	ocsfLines := lines(t, filepath.Join(dir, FormatOCSF.FileName()))
	if len(ocsfLines) != len(records) {
		t.Fatalf("%d OCSF events for %d records", len(ocsfLines), len(records))
	}
	aggregates := 0
	for i, line := range ocsfLines {
		r := records[i]
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(v); err != nil {
			t.Errorf("OCSF event of seq %d (%s) is not valid OCSF 1.3.0 API Activity: %v", r.Seq, r.Reason, err)
		}
		var ev struct {
			Count     *int64 `json:"count"`
			StartTime *int64 `json:"start_time"`
			EndTime   *int64 `json:"end_time"`
			Time      int64  `json:"time"`
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatal(err)
		}
		n, start, end := wantAggregate(r.Reason)
		if n == 0 {
			if ev.Count != nil || ev.StartTime != nil || ev.EndTime != nil {
				t.Errorf("seq %d (%q) is not an aggregate, but its OCSF event has count %v, start_time %v, end_time %v", r.Seq, r.Reason, ev.Count, ev.StartTime, ev.EndTime)
			}
			continue
		}
		aggregates++
		if ev.Count == nil || *ev.Count != n {
			t.Errorf("seq %d (%q): OCSF count %v, want %d (the refusals it stands for)", r.Seq, r.Reason, deref(ev.Count), n)
		}
		if ev.StartTime == nil || *ev.StartTime != unixMilli(t, start) || ev.EndTime == nil || *ev.EndTime != unixMilli(t, end) {
			t.Errorf("seq %d: OCSF start_time %v end_time %v, want the window %s/%s in ms (%d/%d)", r.Seq, deref(ev.StartTime), deref(ev.EndTime), start, end, unixMilli(t, start), unixMilli(t, end))
		}
		if ev.Time != r.Time.UnixMilli() {
			t.Errorf("seq %d: OCSF time %d, want the record's time %d", r.Seq, ev.Time, r.Time.UnixMilli())
		}
	}
	if aggregates != 5 {
		t.Fatalf("%d aggregate records, want 5", aggregates)
	}

	fhirLines := lines(t, filepath.Join(dir, FormatFHIR.FileName()))
	for i, line := range fhirLines {
		var ev struct {
			Recorded string `json:"recorded"`
			Period   *struct {
				Start string `json:"start"`
				End   string `json:"end"`
			} `json:"period"`
			auditEvent
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatal(err)
		}
		var r audit.Record
		for _, rec := range records {
			if rec.Seq == ev.seq() {
				r = rec
			}
		}
		count := ""
		for _, x := range ev.Extension[0].Extension {
			if x.URL == "count" {
				count = x.ValueString
			}
		}
		n, start, end := wantAggregate(r.Reason)
		if n == 0 {
			if ev.Period != nil || count != "" {
				t.Errorf("AuditEvent %d (seq %d, %q) is not an aggregate, but has period %+v and count %q", i, r.Seq, r.Reason, ev.Period, count)
			}
			continue
		}
		if ev.Period == nil || ev.Period.Start != start || ev.Period.End != end {
			t.Errorf("AuditEvent %d (seq %d): period %+v, want the window %s/%s", i, r.Seq, ev.Period, start, end)
		}
		if want := strconv.FormatInt(n, 10); count != want {
			t.Errorf("AuditEvent %d (seq %d): extension count %q, want %s", i, r.Seq, count, want)
		}
	}
	t.Logf("%d records (%d aggregates): %d OCSF events, %d AuditEvents", len(records), aggregates, len(ocsfLines), len(fhirLines))
	// A subtest: without node (outside CI) only this part is skipped.
	t.Run("fhir-r4-outside-validators", func(t *testing.T) {
		rep := validators.FHIR(t, fhirLines)
		for _, inv := range rep.Invalid {
			t.Errorf("AuditEvent %d (id %s) is not valid FHIR R4 (%s): %s", inv.Index, inv.ID, inv.Validator, inv.Message)
		}
		t.Logf("%d AuditEvents checked by %v", rep.Validated, rep.Validators)
	})
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
