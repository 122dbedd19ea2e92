package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/store"
	"github.com/custos-mcp/custos/store/synth"
)

const (
	fhirTemplate = "fhir://{tenant}/patients/{patient}/{type}/{id}"
	noteTemplate = "note://{tenant}/patients/{patient}/notes/{id}"
	pageTemplate = "note://{tenant}/patients/{patient}/notes/{id}/pages/{n}"
)

func complete(t *testing.T, cs *mcp.ClientSession, tmpl, arg, prefix string, ctxArgs map[string]string) *mcp.CompleteResult {
	t.Helper()
	p := &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: tmpl}, Argument: mcp.CompleteParamsArgument{Name: arg, Value: prefix}}
	if ctxArgs != nil {
		p.Context = &mcp.CompleteContext{Arguments: ctxArgs}
	}
	res, err := cs.Complete(context.Background(), p)
	if err != nil {
		t.Fatalf("complete %s %s: %v", tmpl, arg, err)
	}
	return res
}

// want returns the sorted distinct values of field over the listed URIs of
// scheme that satisfy keep.
func want(listed []string, scheme string, field func(store.URI) string, keep func(store.URI) bool) []string {
	var out []string
	for _, raw := range listed {
		u, err := store.ParseURI(raw)
		if err != nil || u.Scheme != scheme || (keep != nil && !keep(u)) {
			continue
		}
		out = append(out, field(u))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// A completion suggests exactly the values of resources the caller can list
// (never more, never fewer), and its one audit record names the patients
// disclosed, pseudonymized.
func TestCompletionSuggestsExactlyWhatListShows(t *testing.T) {
	for _, live := range []bool{false, true} { // a plain and an indexed catalog: two scan paths
		testCompletionSuggestsExactlyWhatListShows(t, live)
	}
}

func testCompletionSuggestsExactlyWhatListShows(t *testing.T, live bool) {
	f := newServerFixture(t, fixtureOptions{live: live})
	k, err := f.keys.AuditKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, persona := range []string{"clinician", "clinician-hiv", "billing", "researcher", "outsider"} {
		for _, rev := range []string{rev2025, rev2026} {
			t.Run(fmt.Sprintf("%s/%s/live=%v", persona, rev, live), func(t *testing.T) {
				cs := f.connectRev(f.identity(persona), rev)
				listed := listAll(t, cs)
				patients := want(listed, "fhir", func(u store.URI) string { return u.Patient }, func(u store.URI) bool { return u.Patient != "" })

				before := len(f.records())
				res := complete(t, cs, fhirTemplate, "patient", "", nil)
				if !slices.Equal(res.Completion.Values, patients) || res.Completion.HasMore || res.Completion.Total != 0 {
					t.Fatalf("patients: got %v (more %v total %d), want %v", res.Completion.Values, res.Completion.HasMore, res.Completion.Total, patients)
				}
				recs := f.records()[before:]
				if len(recs) != 1 {
					t.Fatalf("%d records for one completion", len(recs))
				}
				r := recs[0]
				var pseud []string
				real := f.realIDs() // a researcher is shown aliases; the record names the patients
				for _, p := range patients {
					pseud = append(pseud, audit.Pseudonym(k.Bytes, real(p)))
				}
				slices.Sort(pseud)
				got := slices.Clone(r.Patients)
				slices.Sort(got)
				if r.Action != server.ActionComplete || r.Outcome != audit.OutcomeAllow || !slices.Equal(got, nonNilS(pseud)) || !strings.HasPrefix(r.Reason, "argument=patient returned=") {
					t.Fatalf("completion audited as %s/%s %q patients %v, want %v", r.Action, r.Outcome, r.Reason, got, pseud)
				}
				if res.Meta[server.ReceiptKey] != r.EventID {
					t.Errorf("receipt %v, record %s", res.Meta[server.ReceiptKey], r.EventID)
				}
				for _, p := range patients {
					if strings.Contains(string(audit.Encode(r)), p) || strings.Contains(string(audit.Encode(r)), real(p)) {
						t.Fatal("completion record holds a raw patient id")
					}
				}
				if len(patients) == 0 {
					if persona != "outsider" {
						t.Fatalf("%s may list no fhir resource: the test would prove little", persona)
					}
					return
				}

				// With a patient chosen: ids and types, for fhir and notes,
				// and a typed prefix.
				p0 := patients[0]
				ofP0 := func(u store.URI) bool { return u.Patient == p0 }
				ctxArgs := map[string]string{"tenant": f.identity(persona).Principal.Tenant, "patient": p0}
				ids := want(listed, "fhir", func(u store.URI) string { return u.ID }, ofP0)
				before = len(f.records())
				if got := complete(t, cs, fhirTemplate, "id", "", ctxArgs).Completion.Values; !slices.Equal(got, ids) || len(ids) == 0 {
					t.Errorf("ids of %s: got %v, want %v", p0, got, ids)
				}
				if r := f.records()[before]; len(r.URIs) != len(ids) || !strings.Contains(r.URIs[0], "/patients/"+audit.Pseudonym(k.Bytes, real(p0))+"/") {
					t.Errorf("id completion record URIs %v", r.URIs)
				}
				types := want(listed, "fhir", func(u store.URI) string { return u.Type }, ofP0)
				if got := complete(t, cs, fhirTemplate, "type", "", ctxArgs).Completion.Values; !slices.Equal(got, types) {
					t.Errorf("types of %s: got %v, want %v", p0, got, types)
				}
				notes := want(listed, "note", func(u store.URI) string { return u.ID }, ofP0)
				if got := complete(t, cs, noteTemplate, "id", "", ctxArgs).Completion.Values; !slices.Equal(got, notes) {
					t.Errorf("notes of %s: got %v, want %v", p0, got, notes)
				}
				if got := complete(t, cs, pageTemplate, "id", "", ctxArgs).Completion.Values; !slices.Equal(got, notes) {
					t.Errorf("page template ids of %s: got %v, want %v", p0, got, notes)
				}
				prefix := p0[:2]
				var withPrefix []string
				for _, p := range patients {
					if strings.HasPrefix(p, prefix) {
						withPrefix = append(withPrefix, p)
					}
				}
				if got := complete(t, cs, fhirTemplate, "patient", prefix, nil).Completion.Values; !slices.Equal(got, withPrefix) {
					t.Errorf("patients with prefix %q: got %v, want %v", prefix, got, withPrefix)
				}
				if got := complete(t, cs, pageTemplate, "n", "", ctxArgs).Completion; len(got.Values) != 0 || got.HasMore {
					t.Errorf("page numbers suggested: %+v", got)
				}
			})
		}
	}
}

func nonNilS(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func TestCompletionRejectsUnknownRefsAndArguments(t *testing.T) {
	f := newFixture(t, "")
	cs := f.connect(f.identity("clinician"))
	before := len(f.records())
	for name, p := range map[string]*mcp.CompleteParams{
		"unknown_ref":      {Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "fhir://{tenant}/everything"}, Argument: mcp.CompleteParamsArgument{Name: "tenant"}},
		"prompt":           {Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "summarize"}, Argument: mcp.CompleteParamsArgument{Name: "patient"}},
		"unknown_argument": {Ref: &mcp.CompleteReference{Type: "ref/resource", URI: noteTemplate}, Argument: mcp.CompleteParamsArgument{Name: "type"}},
		"too long":         {Ref: &mcp.CompleteReference{Type: "ref/resource", URI: noteTemplate}, Argument: mcp.CompleteParamsArgument{Name: "id", Value: strings.Repeat("a", 300)}},
	} {
		_, err := cs.Complete(context.Background(), p)
		if rpcCode(err) != jsonrpc.CodeInvalidParams {
			t.Errorf("%s: want -32602, got %v", name, err)
		}
	}
	recs := f.records()[before:]
	if len(recs) != 4 {
		t.Fatalf("%d records for 4 bad completions", len(recs))
	}
	var reasons []string
	for _, r := range recs {
		if r.Action != server.ActionComplete || r.Outcome != audit.OutcomeDeny {
			t.Errorf("bad completion audited as %s/%s", r.Action, r.Outcome)
		}
		reasons = append(reasons, r.Reason)
	}
	slices.Sort(reasons)
	if want := []string{"bad_completion", "unknown_argument", "unknown_ref", "unknown_ref"}; !slices.Equal(reasons, want) {
		t.Errorf("reasons %v, want %v", reasons, want)
	}
}

func TestCompletionFailsClosedWhenPolicyCannotDecide(t *testing.T) {
	dir := t.TempDir()
	writeBrokenPolicy(t, dir)
	f := newFixture(t, dir)
	cs := f.connect(f.identity("clinician"))
	_, err := cs.Complete(context.Background(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: fhirTemplate}, Argument: mcp.CompleteParamsArgument{Name: "patient"}})
	if rpcCode(err) != jsonrpc.CodeInternalError {
		t.Fatalf("want -32603, got %v", err)
	}
	recs := f.records()
	if r := recs[len(recs)-1]; r.Action != server.ActionComplete || r.Outcome != audit.OutcomeError || len(r.Patients) != 0 || !strings.HasPrefix(r.Reason, "policy_error") {
		t.Fatalf("refused completion audited as %s/%s %q %v", r.Action, r.Outcome, r.Reason, r.Patients)
	}
}

// More than 100 candidate values: 100 come back, sorted, with hasMore and no
// total.
func TestCompletionStopsAt100Values(t *testing.T) {
	f := newServerFixture(t, fixtureOptions{
		seed: &synth.Options{Patients: 40, Seed: 3},
		tune: func(c *server.Config) { c.PageSize = 0 }, // the default page size
	})
	cs := f.connect(f.identity("researcher"))
	listed := listAll(t, cs)
	ids := want(listed, "fhir", func(u store.URI) string { return u.ID }, nil)
	if len(ids) <= server.MaxCompletionValues {
		t.Fatalf("only %d listable fhir ids: the test would prove little", len(ids))
	}
	res := complete(t, cs, fhirTemplate, "id", "", nil)
	c := res.Completion
	if len(c.Values) != server.MaxCompletionValues || !c.HasMore || c.Total != 0 || !slices.IsSorted(c.Values) {
		t.Fatalf("%d values, hasMore %v, total %d, sorted %v", len(c.Values), c.HasMore, c.Total, slices.IsSorted(c.Values))
	}
	for _, v := range c.Values {
		if _, ok := slices.BinarySearch(ids, v); !ok {
			t.Fatalf("suggested id %s is not listable", v)
		}
	}
	recs := f.records()
	if r := recs[len(recs)-1]; len(r.URIs) != server.MaxCompletionValues || !strings.HasPrefix(r.Reason, "argument=id returned=100 ") {
		t.Fatalf("record: %d uris, reason %q", len(r.URIs), r.Reason)
	}
}

// A researcher's completion scans in research-URI order, as a research list
// is ordered: when more than 100 values match, the 100 suggested are the
// first in alias order, never those of the catalog's first ids (found by
// review: the scan ran in catalog order, so a truncated answer named the
// aliases of the patients with the smallest real ids). Over a plain and
// an indexed (live) catalog, which take different scan paths.
func TestResearchCompletionFollowsAliasOrder(t *testing.T) {
	for _, live := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "live"}[live], func(t *testing.T) {
			f := newServerFixture(t, fixtureOptions{
				seed: &synth.Options{Patients: 40, Seed: 3},
				live: live,
				tune: func(c *server.Config) { c.PageSize = 0 },
			})
			researcher := f.identity("researcher")
			cs := f.connect(researcher)
			listed := listAll(t, cs) // in research-URI order
			if !slices.IsSorted(listed) {
				t.Fatal("a research list is not in research-URI order: the expectation below would be wrong")
			}
			// The first 100 distinct fhir ids in research-URI order, and
			// for the patients, with a typed prefix of one character.
			var firstIDs, allIDs []string
			seenID := map[string]bool{}
			for _, raw := range listed {
				u, err := store.ParseURI(raw)
				if err != nil || u.Scheme != "fhir" || u.Patient == "" || seenID[u.ID] {
					continue
				}
				seenID[u.ID] = true
				allIDs = append(allIDs, u.ID)
				if len(firstIDs) < server.MaxCompletionValues {
					firstIDs = append(firstIDs, u.ID)
				}
			}
			if len(allIDs) <= server.MaxCompletionValues {
				t.Fatalf("only %d listable fhir ids: the test would prove little", len(allIDs))
			}
			slices.Sort(firstIDs)
			c := complete(t, cs, fhirTemplate, "id", "", nil).Completion
			if !slices.Equal(c.Values, firstIDs) || !c.HasMore {
				t.Fatalf("ids: got %d values (more %v), want the first %d in alias order", len(c.Values), c.HasMore, len(firstIDs))
			}

			// The catalog's order gives other values: the property is not
			// met by chance.
			real := f.realIDs()
			byReal := slices.Clone(allIDs)
			slices.SortFunc(byReal, func(a, b string) int { return strings.Compare(real(a), real(b)) })
			catalogFirst := slices.Clone(byReal[:server.MaxCompletionValues])
			slices.Sort(catalogFirst)
			if slices.Equal(catalogFirst, firstIDs) {
				t.Fatal("alias and catalog order pick the same ids: the test cannot tell them apart")
			}

			// A typed alias prefix and a given patient alias are matched
			// as aliases.
			patients := want(listed, "fhir", func(u store.URI) string { return u.Patient }, nil)
			p0 := patients[len(patients)/2]
			var withPrefix []string
			for _, p := range patients {
				if strings.HasPrefix(p, p0[:1]) {
					withPrefix = append(withPrefix, p)
				}
			}
			if got := complete(t, cs, fhirTemplate, "patient", p0[:1], nil).Completion.Values; !slices.Equal(got, withPrefix) {
				t.Errorf("patients with prefix %q: got %v, want %v", p0[:1], got, withPrefix)
			}
			ids := want(listed, "fhir", func(u store.URI) string { return u.ID }, func(u store.URI) bool { return u.Patient == p0 })
			ctxArgs := map[string]string{"tenant": researcher.Principal.Tenant, "patient": p0}
			if got := complete(t, cs, fhirTemplate, "id", "", ctxArgs).Completion.Values; !slices.Equal(got, ids) || len(ids) == 0 {
				t.Errorf("ids of a patient alias: got %v, want %v", got, ids)
			}
			ctxArgs["patient"] = real(p0) // the real id is no alias: nothing matches
			if got := complete(t, cs, fhirTemplate, "id", "", ctxArgs).Completion; len(got.Values) != 0 || got.HasMore {
				t.Errorf("ids of a real patient id: %+v", got)
			}
		})
	}
}

// writeBrokenPolicy writes a policy that cannot decide (a runtime error
// under strict builtin errors) into dir.
func writeBrokenPolicy(t *testing.T, dir string) {
	t.Helper()
	pol := "package custos.authz\n\ndecision := {\"allow\": to_number(\"not a number\") > 0, \"reasons\": [], \"obligations\": []}\n"
	if err := os.WriteFile(filepath.Join(dir, "broken.rego"), []byte(pol), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A completion whose scan spends its budget on entries the caller may not
// list answers exactly like one that finds nothing: no hasMore, no total
// (found by review: hasMore told a hidden patient with many resources
// apart from a patient that does not exist).
func TestCompletionDoesNotRevealAHiddenPatient(t *testing.T) {
	f := newFixture(t, "")
	f.reconfigure(func(c *server.Config) { c.ScanLimit, c.PageSize = 3, 1 })
	cs := f.connectRev(f.identity("outsider"), rev2025)
	var hidden string
	for _, r := range f.allURIs() {
		if strings.HasPrefix(r.URI, "fhir://") {
			hidden = r.Labels.Patient
			break
		}
	}
	args := func(p string) map[string]string { return map[string]string{"tenant": "general-hospital", "patient": p} }
	a := complete(t, cs, fhirTemplate, "type", "", args(hidden)).Completion
	b := complete(t, cs, fhirTemplate, "type", "", args("00000000-0000-4000-8000-000000000000")).Completion
	if len(a.Values) != 0 || a.HasMore != b.HasMore || a.Total != b.Total || len(b.Values) != 0 {
		t.Fatalf("hidden patient %+v vs missing patient %+v: must look alike", a, b)
	}
}
