package policy

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// disagreeingPolicy is the default policy with a hold on observations added
// to decision only: its decisions rule, which lists use, still allows
// them. Its own tests (a thin set, as a team writing its policy might ship)
// pass.
func disagreeingPolicy(t *testing.T) map[string]string {
	files := defaultPolicyFiles(t)
	const rule = `decision := resource_decision if input.action in {"list", "read"}`
	p := files["custos/authz.rego"]
	if !strings.Contains(p, rule) {
		t.Fatalf("the default policy no longer has %q", rule)
	}
	files["custos/authz.rego"] = strings.Replace(p, rule, `decision := resource_decision if {
	input.action in {"list", "read"}
	not observation_hold
}

observation_hold if input.resource.type == "observation"

decision := {"allow": false, "reasons": ["observation_hold"], "obligations": []} if {
	input.action in {"list", "read"}
	observation_hold
}`, 1)
	files["custos/authz_test.rego"] = `package custos.authz_test

import data.custos.authz

clin := {"sub": "dr.alice", "roles": ["clinician"], "client_id": "a", "tenant": "t", "patients": ["p1"]}

res(ty) := {"uri": "fhir://t/patients/p1/x/1", "type": ty, "patient": "p1", "tenant": "t", "sensitivity": [], "consent": []}

test_observation_on_hold if {
	d := authz.decision with input as {"principal": clin, "purpose_of_use": "TREAT", "action": "read", "resource": res("observation")}
	d.reasons == ["observation_hold"]
}

test_condition_read if authz.decision.allow with input as {"principal": clin, "purpose_of_use": "TREAT", "action": "read", "resource": res("condition")}
`
	return files
}

// TestBatchMustAgreeWithDecision: a list page is decided by the policy's
// decisions rule, a read by decision, and a listing must never show what a
// read would deny (docs/policy.md). custos took the agreement on trust: a
// policy whose decision held back observations while decisions did not
// loaded, and a clinician's list showed 14 observations whose reads were
// refused (found probing a hand-edited policy with `custos serve --dev
// --policy-dir`; policy test, check and impact all passed it, impact
// replaying reads only). Every load now decides a grid of synthetic
// requests both ways and refuses a candidate on which they differ.
func TestBatchMustAgreeWithDecision(t *testing.T) {
	ctx := context.Background()
	dir := writeDir(t, disagreeingPolicy(t))
	check := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: a policy whose decisions allows what decision denies was accepted", what)
		}
		if !errors.Is(err, ErrTestsFailed) || !strings.Contains(err.Error(), "decisions") || !strings.Contains(err.Error(), "observation") {
			t.Errorf("%s: error %v, want ErrTestsFailed naming decisions and the item", what, err)
		}
	}
	_, err := DirSource{Dir: dir}.Load(ctx)
	check("DirSource.Load", err)
	_, err = BuildBundle(ctx, dir, "r1")
	check("BuildBundle", err)
	b := newBundle(filesOf(disagreeingPolicy(t)), "r1")
	check("CheckBundle", CheckBundle(ctx, b))

	// The default policy, and a policy without decisions (lists evaluate
	// decision per item), load.
	if _, err := (DirSource{Dir: writeDir(t, defaultPolicyFiles(t))}).Load(ctx); err != nil {
		t.Errorf("the default policy: %v", err)
	}
	if _, err := (DirSource{Dir: writeDir(t, reasonPolicy("a"))}).Load(ctx); err != nil {
		t.Errorf("a policy without decisions: %v", err)
	}
}
