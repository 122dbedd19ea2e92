package policy

import (
	"context"
	"reflect"
	"testing"
	"testing/fstest"
)

func TestDecisionCacheEqualsEvaluation(t *testing.T) {
	ctx := context.Background()
	cached := mustDefault(t)
	plain, err := Default(ctx, Options{DecisionCache: -1})
	if err != nil {
		t.Fatal(err)
	}
	if cached.cache == nil || plain.cache != nil {
		t.Fatal("the default policy is deterministic: the cache must be on by default and off with -1")
	}
	p, page := listPage100()
	r := researcher
	r.Patients = p.Patients
	for _, tc := range []struct {
		p       Principal
		purpose string
	}{{p, "TREAT"}, {r, "HRESCH"}, {p, "HRESCH"}, {r, "ETREAT"}} {
		subj := NewSubject(tc.p)
		for _, res := range page {
			for _, act := range []Action{ActionList, ActionRead} {
				in := Input{Subject: subj, PurposeOfUse: tc.purpose, Action: act, Resource: res}
				want, err := plain.Decide(ctx, in)
				if err != nil {
					t.Fatal(err)
				}
				first, _ := cached.Decide(ctx, in)
				second, _ := cached.Decide(ctx, in) // from the cache
				for _, got := range []Decision{first, second} {
					if got.Allow != want.Allow || !reflect.DeepEqual(got.Reasons, want.Reasons) || !reflect.DeepEqual(got.Obligations, want.Obligations) {
						t.Fatalf("cached decision differs for %s %s %s: %+v vs %+v", tc.purpose, act, res.Type, got, want)
					}
				}
				if first.ID == second.ID {
					t.Fatal("a cached decision reused the decision id")
				}
				// A caller mutating a decision does not change the cache.
				if len(second.Reasons) > 0 {
					second.Reasons[0] = "mutated"
					if third, _ := cached.Decide(ctx, in); third.Reasons[0] == "mutated" {
						t.Fatal("the cache hands out shared slices")
					}
				}
			}
		}
	}
}

func TestDecisionCacheKeySeesEveryField(t *testing.T) {
	p, page := listPage100()
	base := Input{Subject: NewSubject(p), PurposeOfUse: "TREAT", Action: ActionRead, Resource: page[0]}
	q := p
	q.Patients = append([]string(nil), p.Patients[1:]...)
	r := *page[0]
	r.Sensitivity = []string{"sud"}
	r2 := *page[0]
	r2.URI += "x"
	for _, withURI := range []bool{true, false} {
		k := cacheKey(&base, withURI)
		for name, in := range map[string]Input{
			"care team":   {Subject: NewSubject(q), PurposeOfUse: "TREAT", Action: ActionRead, Resource: page[0]},
			"purpose":     {Subject: base.Subject, PurposeOfUse: "ETREAT", Action: ActionRead, Resource: page[0]},
			"action":      {Subject: base.Subject, PurposeOfUse: "TREAT", Action: ActionList, Resource: page[0]},
			"sensitivity": {Subject: base.Subject, PurposeOfUse: "TREAT", Action: ActionRead, Resource: &r},
			"uri":         {Subject: base.Subject, PurposeOfUse: "TREAT", Action: ActionRead, Resource: &r2},
			"break glass": {Subject: base.Subject, PurposeOfUse: "TREAT", Action: ActionRead, Resource: page[0], BreakGlass: &BreakGlass{Grant: "g", Patient: page[0].Patient}},
			"principal":   {Principal: q, PurposeOfUse: "TREAT", Action: ActionRead, Resource: page[0]},
		} {
			changed := cacheKey(&in, withURI) != k
			if want := withURI || name != "uri"; changed != want {
				t.Errorf("with the URI %v: changing the %s changes the cache key: %v, want %v", withURI, name, changed, want)
			}
		}
		same := Input{Principal: p, PurposeOfUse: "TREAT", Action: ActionRead, Resource: page[0]}
		if cacheKey(&same, withURI) != k {
			t.Errorf("with the URI %v: a Principal and its Subject give different keys", withURI)
		}
	}
	if cacheKey(&base, true) == cacheKey(&base, false) {
		t.Error("keys with and without the URI coincide")
	}
}

func TestNondeterministicPolicyIsNotCached(t *testing.T) {
	fsys := fstest.MapFS{"authz.rego": {Data: []byte(`package custos.authz

decision := {"allow": true, "reasons": ["office_hours"], "obligations": []} if {
	time.clock([time.now_ns(), "UTC"])[0] < 24
}
`)}}
	e, err := Load(context.Background(), fsys, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if e.cache != nil {
		t.Fatal("a policy calling time.now_ns must not be cached")
	}
	if ok, b := deterministic(nil); !ok || b != "" {
		t.Fatal("no modules are deterministic")
	}
}
