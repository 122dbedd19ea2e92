package policy

import (
	"context"
	"strings"
	"testing"
)

func TestExplainNamesTheRulesThatFired(t *testing.T) {
	ctx := context.Background()
	e, err := Default(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var outsider, clinician Input
	for _, ex := range CheckExamples() {
		switch ex.Name {
		case "outsider read":
			outsider = ex.Input
		case "clinician read (care team)":
			clinician = ex.Input
		}
	}
	cases := []struct {
		in        Input
		allow     bool
		want, not []string
	}{
		{clinician, true,
			[]string{`grant(mode, _, care, _, _)`, "class_decision(req, has_res, typ, tenant, ref, care, bg, bg_ok, sens, consent)", "resource_decision", "care_relationship_patients"},
			[]string{"known_types", "class_decision(…) (else)", "no_grant_reasons"}},
		{outsider, false,
			[]string{"class_decision(…) (else)", "no_grant_reasons(req, has_res, typ, tenant, ref, care, bg, bg_ok, sens, consent)", "resource_denies(true, typ, tenant, sens, consent)"},
			[]string{"grant(", "allow_reasons"}},
	}
	for _, c := range cases {
		ex, err := e.Explain(ctx, c.in)
		if err != nil || ex.Decision.Allow != c.allow {
			t.Fatalf("%s: allow=%v err=%v", c.in.Principal.Sub, ex.Decision.Allow, err)
		}
		rules := map[string]bool{}
		for _, f := range ex.Fired {
			rules[f.Rule] = true
			if !strings.HasPrefix(f.Location, "custos/authz.rego:") {
				t.Errorf("%s: location %q", f.Rule, f.Location)
			}
		}
		for _, w := range c.want {
			if !rules[w] {
				t.Errorf("%s: %q did not fire; fired %v", c.in.Principal.Sub, w, ex.Fired)
			}
		}
		for _, n := range c.not {
			for r := range rules {
				if strings.HasPrefix(r, n) {
					t.Errorf("%s: %q reported as fired", c.in.Principal.Sub, r)
				}
			}
		}
	}
}
