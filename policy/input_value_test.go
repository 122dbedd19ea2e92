package policy

import (
	"encoding/json"
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
