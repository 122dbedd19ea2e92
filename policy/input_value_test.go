package policy

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// The input document the engine builds (value, stringArray) is the JSON
// encoding of the Input, term for term: the plain path (encoding/json, then
// OPA's own conversion) is the reference.
func TestInputValueIsItsJSON(t *testing.T) {
	p := Principal{Sub: "dr.a", Roles: []string{"clinician", "sensitive:hiv"}, ClientID: "c", Tenant: "t",
		Patients: []string{"p1", "p2", "p3"}}
	for _, in := range []Input{
		{Principal: p, PurposeOfUse: "TREAT", Action: ActionRead,
			Resource: &Resource{URI: "u", Type: "note", Patient: "p1", Tenant: "t", Sensitivity: []string{"hiv", "vip"}, Consent: []string{}}},
		{Principal: p, PurposeOfUse: "ETREAT", Action: ActionList, Resource: &Resource{URI: "u", Sensitivity: []string{}, Consent: []string{"opt-out"}},
			BreakGlass: &BreakGlass{Grant: "g", Patient: "p2"}},
		{Subject: NewSubject(p), PurposeOfUse: "HRESCH", Action: ActionTemplates},
	} {
		plain := in
		if plain.Subject != nil {
			plain.Principal, plain.Subject = p, nil
		}
		b, err := json.Marshal(plain)
		if err != nil {
			t.Fatal(err)
		}
		var x any
		if err := json.Unmarshal(b, &x); err != nil {
			t.Fatal(err)
		}
		want, err := ast.InterfaceToValue(x)
		if err != nil {
			t.Fatal(err)
		}
		if got := in.value(); got.Compare(want) != 0 || !ast.ValueEqual(got, want) {
			t.Fatalf("input document:\n got %v\nwant %v", got, want)
		}
	}
}

// Shared terms are the terms they stand for, the same one for every input
// that holds the string, and past the bound still the right term.
func TestSharedStringTerms(t *testing.T) {
	for _, a := range []Action{ActionList, ActionRead, ActionTemplates, "other"} {
		if got := actionTerm(a); !got.Equal(ast.StringTerm(string(a))) {
			t.Errorf("actionTerm(%q) = %v", a, got)
		}
	}
	if a, b := sharedStringTerm("TREAT"), sharedStringTerm("TREAT"); a != b || !a.Equal(ast.StringTerm("TREAT")) {
		t.Errorf("sharedStringTerm(TREAT): %p %v, %p %v", a, a, b, b)
	}
	for i := range maxSharedTerms + 10 {
		s := fmt.Sprintf("type-%d", i)
		if got := sharedStringTerm(s); !got.Equal(ast.StringTerm(s)) {
			t.Fatalf("sharedStringTerm(%q) = %v", s, got)
		}
	}
	if n := sharedTermsN.Load(); n > maxSharedTerms {
		t.Errorf("%d shared terms kept, bound %d", n, maxSharedTerms)
	}
	if got := stringArray(nil); !got.Equal(ast.ArrayTerm()) {
		t.Errorf("stringArray(nil) = %v", got)
	}
}
