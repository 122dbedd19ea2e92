package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/policy/btg"
	"github.com/custos-mcp/custos/store"
)

// TestReadInputsRecordedPseudonymizedAndReplayable: every read and
// templates request that reached a decision stores the policy input it
// evaluated; list requests store none. The stored inputs hold keyed hashes
// instead of patient ids (also in the principal's care team and inside
// URIs), and replaying one with the same policy reproduces the recorded
// decision, so equality tests survive pseudonymization.
func TestReadInputsRecordedPseudonymizedAndReplayable(t *testing.T) {
	f := newFixture(t, "")
	ctx := context.Background()
	// The patients' resources (the tenant-level reference data, the
	// synthetic payers, concerns none).
	all := slices.DeleteFunc(f.allURIs(), func(r store.Resource) bool { return r.Labels.Patient == "" })
	u, _ := store.ParseURI(all[0].URI)
	u.ID = "00000000-0000-4000-8000-000000000000"
	missing := u.String()
	ids := map[string]bool{}
	for _, persona := range []string{"clinician", "billing"} {
		id := f.identity(persona)
		for _, p := range id.Principal.Patients {
			ids[p] = true
		}
		cs := f.connect(id)
		if _, err := cs.ListResources(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.ListResourceTemplates(ctx, nil); err != nil {
			t.Fatal(err)
		}
		for _, r := range append([]string{missing}, uris(all[:40])...) {
			cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: r}) // allowed or denied: both are recorded
		}
	}
	for _, r := range all {
		ids[r.Labels.Patient] = true
	}
	k, err := f.keys.AuditKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clinician := f.identity("clinician").Principal
	wantTeam := make([]string, len(clinician.Patients))
	for i, p := range clinician.Patients {
		wantTeam[i] = audit.Pseudonym(k.Bytes, p)
	}

	inputs := map[uint64][]byte{}
	if err := f.log.Inputs(ctx, 1, 1<<20, func(seq uint64, in []byte) error { inputs[seq] = in; return nil }); err != nil {
		t.Fatal(err)
	}
	eng, err := policy.Default(ctx, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, rec := range f.records() {
		raw, ok := inputs[rec.Seq]
		if rec.Action == "resources/list" {
			if ok {
				t.Errorf("list record %d has a stored input", rec.Seq)
			}
			continue
		}
		if !ok {
			t.Fatalf("%s record %d (%s) has no stored input", rec.Action, rec.Seq, rec.Reason)
		}
		var in policy.Input
		if err := json.Unmarshal(raw, &in); err != nil {
			t.Fatalf("record %d input: %v", rec.Seq, err)
		}
		if in.Principal.Sub != rec.Principal.Sub || in.PurposeOfUse != rec.PurposeOfUse || in.Principal.Tenant == "" {
			t.Errorf("record %d: input principal %q/%q, record %q/%q", rec.Seq, in.Principal.Sub, in.PurposeOfUse, rec.Principal.Sub, rec.PurposeOfUse)
		}
		if in.Principal.Sub == clinician.Sub && !slices.Equal(in.Principal.Patients, wantTeam) {
			t.Errorf("record %d: care team %v, want the pseudonyms %v", rec.Seq, in.Principal.Patients, wantTeam)
		}
		if rec.Action == "resources/read" {
			if in.Resource == nil || len(rec.URIs) != 1 || in.Resource.URI != rec.URIs[0] || len(rec.Patients) != 1 || in.Resource.Patient != rec.Patients[0] {
				t.Fatalf("record %d: input resource %+v does not match the record's %v %v", rec.Seq, in.Resource, rec.URIs, rec.Patients)
			}
			if !strings.HasPrefix(in.Resource.Patient, audit.PseudonymPrefix) {
				t.Errorf("record %d: resource.patient is not a pseudonym", rec.Seq)
			}
		}
		// Replay with the policy that decided.
		d, err := eng.Decide(ctx, in)
		if err != nil {
			t.Fatalf("record %d: replay: %v", rec.Seq, err)
		}
		switch {
		case rec.Reason == "not_found":
			counts["not_found"]++
		case (rec.Outcome == audit.OutcomeAllow) != d.Allow || strings.Join(d.Reasons, ",") != rec.Reason:
			t.Errorf("record %d: recorded %s %s, replayed allow=%v %v", rec.Seq, rec.Outcome, rec.Reason, d.Allow, d.Reasons)
		default:
			counts[rec.Outcome]++
		}
	}
	if counts["allow"] == 0 || counts["deny"] == 0 || counts["not_found"] != 2 {
		t.Fatalf("replayed %v: want allowed, denied and 2 not-found reads", counts)
	}

	f.log.Close()
	db, err := os.ReadFile(f.logPath)
	if err != nil {
		t.Fatal(err)
	}
	for id := range ids {
		if bytes.Contains(db, []byte(id)) {
			t.Fatalf("audit.db holds a raw patient id")
		}
	}
}

// TestBreakGlassReadInputKeepsItsGrant: the stored input of a read
// decided under a break-the-glass grant holds the grant (input.break_glass,
// docs/policy.md "Input"), its patient pseudonymized like resource.patient,
// so that replaying it with the policy that decided allows it again. Found
// by h-review52 with the real binary: 'custos policy impact' of the very
// policy serving reported every break-glass read as allow→deny
// (break_glass,grant=… → break_glass_grant_required), since the stored
// input had no break_glass at all.
func TestBreakGlassReadInputKeepsItsGrant(t *testing.T) {
	f, grants, id, target := newBreakGlassFixture(t)
	ctx := context.Background()
	now := time.Now()
	grants.Replace([]btg.Grant{{ID: "g-1", Sub: id.Principal.Sub, Patient: target.Patient, Tenant: target.Tenant,
		Created: now.Add(-time.Minute), Expires: now.Add(time.Hour)}})
	if _, err := f.connect(id).ReadResource(ctx, &mcp.ReadResourceParams{URI: target.String()}); err != nil {
		t.Fatal(err)
	}
	var rec audit.Record
	for _, r := range f.records() {
		if r.Action == "resources/read" {
			rec = r
		}
	}
	if rec.Outcome != audit.OutcomeAllow || !strings.Contains(rec.Reason, "break_glass") {
		t.Fatalf("the read under the grant was recorded %s %q", rec.Outcome, rec.Reason)
	}
	var raw []byte
	if err := f.log.Inputs(ctx, rec.Seq, rec.Seq, func(_ uint64, in []byte) error { raw = in; return nil }); err != nil || raw == nil {
		t.Fatalf("no stored input for record %d: %v", rec.Seq, err)
	}
	var in policy.Input
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Fatal(err)
	}
	if in.BreakGlass == nil || in.BreakGlass.Grant != "g-1" || in.Resource == nil || in.BreakGlass.Patient != in.Resource.Patient {
		t.Fatalf("stored input of record %d: break_glass %+v, resource %+v: want grant g-1 for the resource's (pseudonymized) patient", rec.Seq, in.BreakGlass, in.Resource)
	}
	if bytes.Contains(raw, []byte(target.Patient)) {
		t.Errorf("the stored input names the patient in clear: %s", raw)
	}
	eng, err := policy.Default(ctx, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := eng.Decide(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Allow || strings.Join(d.Reasons, ",") != rec.Reason {
		t.Errorf("replayed allow=%v %v, recorded %s %q", d.Allow, d.Reasons, rec.Outcome, rec.Reason)
	}
}

func uris(rs []store.Resource) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.URI
	}
	return out
}
