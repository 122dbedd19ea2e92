package policy_test

import (
	"slices"
	"testing"

	"github.com/custos-mcp/custos/minimize"
	"github.com/custos-mcp/custos/policy"
)

func TestEnforce(t *testing.T) {
	allow := policy.Decision{Allow: true, Reasons: make([]string, 1, 4), Obligations: []minimize.Obligation{{Op: minimize.OpRemove, Path: "/name"}}}
	allow.Reasons[0] = "clinician_care_team"
	plain := policy.Decision{Allow: true, Reasons: []string{"clinician_care_team"}}
	deny := policy.Decision{Reasons: []string{"no_care_relationship"}}
	cases := []struct {
		name            string
		d               policy.Decision
		caller, owner   string
		binary          bool
		allowed         bool
		reasons         []string
		keptObligations bool
	}{
		{"same tenant", allow, "a", "a", false, true, []string{"clinician_care_team"}, true},
		{"other tenant", allow, "a", "b", false, false, []string{"clinician_care_team", policy.ReasonTenantBoundary}, false},
		{"caller without tenant", plain, "", "", false, false, []string{"clinician_care_team", policy.ReasonTenantBoundary}, false},
		{"binary with obligations", allow, "a", "a", true, false, []string{"clinician_care_team", policy.ReasonBinaryNotMinimizable}, true},
		{"binary without obligations", plain, "a", "a", true, true, []string{"clinician_care_team"}, false},
		{"other tenant and binary: the boundary", allow, "a", "b", true, false, []string{"clinician_care_team", policy.ReasonTenantBoundary}, false},
		{"a denial stays as it is", deny, "a", "b", true, false, []string{"no_care_relationship"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := slices.Clone(c.d.Reasons)
			got := policy.Enforce(c.d, c.caller, c.owner, c.binary)
			if got.Allow != c.allowed || !slices.Equal(got.Reasons, c.reasons) || (len(got.Obligations) > 0) != c.keptObligations {
				t.Errorf("Enforce = %+v, want allow %v, reasons %v, obligations kept %v", got, c.allowed, c.reasons, c.keptObligations)
			}
			if !slices.Equal(c.d.Reasons, before) {
				t.Errorf("Enforce wrote the caller's reasons: %v", c.d.Reasons)
			}
			if cap(c.d.Reasons) > len(c.d.Reasons) && c.d.Reasons[:len(c.d.Reasons)+1][len(c.d.Reasons)] != "" {
				t.Errorf("Enforce wrote past the caller's reasons into their spare capacity")
			}
		})
	}
}
