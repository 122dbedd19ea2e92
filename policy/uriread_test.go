package policy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/open-policy-agent/opa/v1/ast"
)

// readsURIOf compiles one module as compile does and runs the analysis.
func readsURIOf(t *testing.T, src string) bool {
	t.Helper()
	m, err := ast.ParseModuleWithOpts("p.rego", src, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		t.Fatal(err)
	}
	a, ok := analyse([]*ast.Module{m})
	if !ok {
		t.Fatalf("analysis failed to compile:\n%s", src)
	}
	return a.readsURI
}

// uriModuleHead opens the policies of resourceURICases.
const uriModuleHead = "package custos.authz\n\n"

// resourceURICases are policies (after uriModuleHead) and whether a rule
// can read input.resource.uri: TestReadsResourceURI, and the reference
// corpus of TestURIAnalysisIsAtLeastAsConservative.
var resourceURICases = []struct {
	name, body string
	want       bool
}{
	{"fields by name", `decision := {"allow": input.resource.type == "note" , "reasons": [input.resource.patient], "obligations": []}`, false},
	{"type check of the resource", `decision := {"allow": is_object(input.resource), "reasons": [type_name(input.resource)], "obligations": []}`, false},
	{"principal and break glass", `decision := {"allow": input.principal.sub == input.break_glass.patient, "reasons": [], "obligations": []}`, false},
	{"the URI", `decision := {"allow": startswith(input.resource.uri, "custos://t/"), "reasons": [], "obligations": []}`, true},
	{"the URI in a function", "f(x) := x\n" + `decision := {"allow": f(input.resource.uri) == "a", "reasons": [], "obligations": []}`, true},
	{"the whole resource", `decision := {"allow": true, "reasons": [], "obligations": [object.union({}, input.resource)]}`, true},
	{"the resource in a variable", `decision := {"allow": r.type == "note", "reasons": [], "obligations": []} if r := input.resource`, true},
	{"object.get of a field", `decision := {"allow": object.get(input.resource, "type", "") == "note", "reasons": [object.get(input, "break_glass", null)], "obligations": []}`, false},
	{"object.get of a path", `decision := {"allow": object.get(input, ["resource", "type"], "") == "note", "reasons": [], "obligations": []}`, false},
	{"object.get of the URI by path", `decision := {"allow": object.get(input, ["resource", "uri"], "") == "a", "reasons": [], "obligations": []}`, true},
	{"object.get of the URI", `decision := {"allow": object.get(input.resource, "uri", "") == "a", "reasons": [], "obligations": []}`, true},
	{"object.get of the resource", `decision := {"allow": object.get(input, "resource", {}).uri == "a", "reasons": [], "obligations": []}`, true},
	{"object.get with a variable key", `decision := {"allow": true, "reasons": [object.get(input.resource, k, "") | some k in ["type", "uri"]], "obligations": []}`, true},
	{"the whole input", `decision := {"allow": json.marshal(input) == "", "reasons": [], "obligations": []}`, true},
	{"a dynamic key of the resource", `decision := {"allow": true, "reasons": [k | some k, _ in input.resource], "obligations": []}`, true},
	{"a dynamic key of the input", `decision := {"allow": true, "reasons": [k | some k; input[k]], "obligations": []}`, true},
	{"an import", "import input.resource as res\n" + `decision := {"allow": res.uri == "a", "reasons": [], "obligations": []}`, true},
	{"with the input replaced", "allowed if input.resource.type == \"note\"\n" + `decision := {"allow": true, "reasons": [], "obligations": []} if allowed with input.resource.type as "note"`, true},
	{"a type check of the URI itself", `decision := {"allow": is_string(input.resource.uri), "reasons": [], "obligations": []}`, true},
	// A policy function named like a type-check builtin or object.get is
	// called in its place (the compiler resolves the name to the policy's
	// function): until h-policy11 the text scan took it for the builtin and
	// cached the decisions of a policy deciding by the URI without it.
	{"a policy function named is_object", "is_object(x) := startswith(x.uri, \"custos://t/note/a\")\n" + `decision := {"allow": is_object(input.resource), "reasons": [], "obligations": []}`, true},
	{"a policy function named type_name", "type_name(x) := x.uri\n" + `decision := {"allow": type_name(input.resource) == "a", "reasons": [], "obligations": []}`, true},
	{"a policy function named object.get", "object.get(x, _, _) := x.uri\n" + `decision := {"allow": object.get(input.resource, "type", "") == "a", "reasons": [], "obligations": []}`, true},
	{"a builtin replaced by a function", "f(x) := x.uri\n" + `decision := {"allow": true, "reasons": [], "obligations": []} if is_object(input.resource) with is_object as f`, true},
	{"a builtin replaced by a value", `decision := {"allow": t, "reasons": [], "obligations": []} if t := is_object(input.resource) with is_object as true`, false},
	{"data replaced by a value", "flag := false\n" + `decision := {"allow": allowed, "reasons": [], "obligations": []} if allowed := allow_note with flag as true` + "\nallow_note if { flag; input.resource.type == \"note\" }", false},
	{"a rule replaced by the resource", "res := {}\n" + `decision := {"allow": ok, "reasons": [], "obligations": []} if ok := uri_ok with res as input.resource` + "\nuri_ok if startswith(res.uri, \"a\")", true},
	{"the resource unified with a variable", `decision := {"allow": r.type == "note", "reasons": [], "obligations": []} if r = input.resource`, true},
	{"count of the resource", `decision := {"allow": count(input.resource) > 3, "reasons": [], "obligations": []}`, true},
	{"the resource in an every domain", `decision := {"allow": true, "reasons": [], "obligations": []} if every _, v in input.resource { v != "" }`, true},
	{"a template string of the URI", `decision := {"allow": $"{input.resource.uri}" == "a", "reasons": [], "obligations": []}`, true},
}

// TestReadsResourceURI: the analysis finds every way a rule can read
// input.resource.uri that resourceURICases pin (and none where they read
// fields by name).
func TestReadsResourceURI(t *testing.T) {
	for _, tc := range resourceURICases {
		t.Run(tc.name, func(t *testing.T) {
			if got := readsURIOf(t, uriModuleHead+tc.body+"\n"); got != tc.want {
				t.Errorf("readsURI = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDefaultPolicyKeysWithoutTheURI: the default policy reads every
// resource field by name, and never the URI, so its decisions are cached
// per combination of the other fields.
func TestDefaultPolicyKeysWithoutTheURI(t *testing.T) {
	e, err := Default(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if e.keyURI {
		t.Fatal("the default policy's cache keys include the URI: some rule reads input.resource.uri or input.resource whole")
	}
}

// TestURIReadingPolicyDecidesPerURI: a policy that reads the URI keeps it
// in the cache key, so two resources that differ only in their URI are
// decided apart even when the first decision is cached.
func TestURIReadingPolicyDecidesPerURI(t *testing.T) {
	ctx := context.Background()
	e, err := Load(ctx, fstest.MapFS{"p.rego": {Data: []byte(`package custos.authz

decision := {"allow": r.uri == "custos://t/note/a", "reasons": ["by_uri"], "obligations": []} if r := input.resource
`)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !e.keyURI || e.cache == nil {
		t.Fatalf("keyURI %v, cache %v: want a cache keyed with the URI", e.keyURI, e.cache != nil)
	}
	subj := NewSubject(clinician)
	for range 2 { // the second round is served from the cache
		for uri, want := range map[string]bool{"custos://t/note/a": true, "custos://t/note/b": false} {
			r := resource("note", patientA)
			r.URI = uri
			d, err := e.Decide(ctx, Input{Subject: subj, PurposeOfUse: "TREAT", Action: ActionRead, Resource: r})
			if err != nil || d.Allow != want {
				t.Fatalf("%s: %+v, %v; want allow %v", uri, d, err, want)
			}
		}
	}
}

// TestURIFreeCacheAgreesWithEvaluation drives the default policy's cached
// engine (decision cache keyed without the URI, subject cache) and an
// engine without any cache through the same random requests, each feature
// combination asked under several URIs, one by one and as list pages:
// every decision must be the same.
func TestURIFreeCacheAgreesWithEvaluation(t *testing.T) {
	ctx := context.Background()
	cached, err := Default(ctx, Options{Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := Default(ctx, Options{DecisionCache: -1, SubjectCache: -1, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if cached.keyURI || cached.cache == nil {
		t.Fatal("the cached engine does not key without the URI")
	}
	rng := rand.New(rand.NewPCG(17, 25))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	patients := []string{patientA, patientB, "", "3f0c9a7e-1d2b-4c5e-8f6a-7b8c9d0e1f20"}
	tenants := []string{tenant, "other-hospital", ""}
	principals := []Principal{clinician, billing, researcher, auditor,
		{Sub: "dr.hiv", Roles: []string{"clinician", "sensitive:hiv"}, Tenant: tenant, Patients: []string{patientA, patientB}},
		{Sub: "dr.other", Roles: []string{"clinician"}, Tenant: "other-hospital", Patients: []string{patientA}},
		{Sub: "nobody", Tenant: tenant},
	}
	labels := [][]string{{}, {"hiv"}, {"vip"}, {"restricted"}, {"bogus"}, {"sud", "vip"}}
	consents := [][]string{{}, {"opt-out"}, {"bogus"}}
	disagree := 0
	compare := func(what string, got, want Decision) {
		t.Helper()
		if got.Allow != want.Allow || !reflect.DeepEqual(got.Reasons, want.Reasons) || !reflect.DeepEqual(got.Obligations, want.Obligations) {
			disagree++
			if disagree <= 5 {
				t.Errorf("%s: cached %v %v %v, evaluated %v %v %v", what, got.Allow, got.Reasons, got.Obligations, want.Allow, want.Reasons, want.Obligations)
			}
		}
	}
	for i := range 400 {
		p := principals[rng.IntN(len(principals))]
		purpose := pick("TREAT", "ETREAT", "HPAYMT", "HRESCH", "", "NOPE")
		subj := NewSubject(p)
		var items []Item
		for range 1 + rng.IntN(4) {
			r := Resource{
				Type:        pick("note", "observation", "coverage", "encounter", "patient", "organization", "bogus"),
				Patient:     patients[rng.IntN(len(patients))],
				Tenant:      tenants[rng.IntN(len(tenants))],
				Sensitivity: labels[rng.IntN(len(labels))],
				Consent:     consents[rng.IntN(len(consents))],
			}
			var bg *BreakGlass
			if rng.IntN(3) == 0 {
				bg = &BreakGlass{Grant: "g-1", Patient: patients[rng.IntN(len(patients))]}
			}
			for u := range 3 { // the same features under three URIs
				x := r
				x.URI = fmt.Sprintf("custos://%s/%s/%d-%d", x.Tenant, x.Type, i, u)
				in := Input{Subject: subj, PurposeOfUse: purpose, Action: ActionRead, Resource: &x, BreakGlass: bg}
				got, gerr := cached.Decide(ctx, in)
				want, werr := plain.Decide(ctx, in)
				if (gerr == nil) != (werr == nil) {
					t.Fatalf("request %d: cached error %v, evaluated error %v", i, gerr, werr)
				}
				compare(fmt.Sprintf("request %d (%s, %s, %+v, break glass %v)", i, p.Sub, purpose, x, bg), got, want)
				items = append(items, Item{Resource: &x, BreakGlass: bg})
			}
		}
		// The same resources listed under fresh URIs: batch decisions go
		// through the same cache.
		page := make([]Item, len(items))
		for j, it := range items {
			x := *it.Resource
			x.URI += "/listed"
			page[j] = Item{Resource: &x, BreakGlass: it.BreakGlass}
		}
		got, gerr := cached.DecideBatch(ctx, Input{Subject: subj, PurposeOfUse: purpose, Action: ActionList}, page)
		want, werr := plain.DecideBatch(ctx, Input{Subject: subj, PurposeOfUse: purpose, Action: ActionList}, page)
		if (gerr == nil) != (werr == nil) || len(got) != len(want) {
			t.Fatalf("page %d: cached %d decisions, error %v; evaluated %d, error %v", i, len(got), gerr, len(want), werr)
		}
		for j := range got {
			compare(fmt.Sprintf("page %d item %d", i, j), got[j], want[j])
		}
	}
	if disagree > 0 {
		t.Fatalf("%d decisions disagree", disagree)
	}
	if n := len(cached.cache.m); n == 0 {
		t.Fatal("nothing was cached")
	}
}

// TestListRuleDenyingByItemURIDeniesOnList: a policy whose list rule
// (decisions) denies items by their URI's prefix, while its read rule
// (decision) never reads input.resource.uri, must deny exactly those items
// on list, through the cached engine too. Until 2026-12-06 the static
// check saw reads of input.resource.uri only: such a policy had its items
// given without "uri", its rule found the URI undefined and allowed every
// item, silently. The analysis now follows the items into the rule's
// function (readsItemURI): items carry their URI and decisions are cached
// per URI.
func TestListRuleDenyingByItemURIDeniesOnList(t *testing.T) {
	ctx := context.Background()
	const vip = "custos://t/patients/vip/"
	fsys := fstest.MapFS{"p.rego": {Data: []byte(`package custos.authz

decision := {"allow": true, "reasons": [], "obligations": []} if input.action in {"list", "read"}

decisions := [item_decision(item) | some item in input.items] if input.action in {"list", "read"}

item_decision(item) := {"allow": false, "reasons": ["vip_uri"], "obligations": []} if {
	startswith(item.resource.uri, "` + vip + `")
} else := {"allow": true, "reasons": [], "obligations": []}
`)}}
	cached, err := Load(ctx, fsys, Options{Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := Load(ctx, fsys, Options{DecisionCache: -1, SubjectCache: -1, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if c := cached.Caching(); !c.Decisions || c.WithoutURI || !c.ItemsCarryURI {
		t.Errorf("caching %+v: want decisions cached per URI, and list items with their URI", c)
	}
	subj := NewSubject(clinician)
	item := func(uri string) Item {
		r := resource("observation", patientA)
		r.URI = uri
		return Item{Resource: r}
	}
	pages := [][]Item{
		{item("custos://t/patients/plain/observation/1"), item(vip + "observation/1")},
		{item(vip + "observation/2")},
		{item("custos://t/patients/plain/observation/2"), item(vip + "observation/1")},
	}
	for name, e := range map[string]*Engine{"cached": cached, "uncached": plain} {
		for i, page := range pages {
			ds, err := e.DecideBatch(ctx, Input{Subject: subj, PurposeOfUse: "TREAT", Action: ActionList}, page)
			if err != nil {
				t.Fatalf("%s page %d: %v", name, i, err)
			}
			for j, it := range page {
				if want := !strings.HasPrefix(it.Resource.URI, vip); ds[j].Allow != want {
					t.Errorf("%s engine, page %d, item %s: list allow %v (%v), want %v", name, i, it.Resource.URI, ds[j].Allow, ds[j].Reasons, want)
				}
			}
		}
	}
}

// TestPolicyFunctionNamedLikeABuiltinDecidesPerURI: a policy whose own
// function is named like a type-check builtin (is_object, type_name) or
// object.get is called in its place, and here it decides by the URI. Until
// h-policy11 the text scan took each for the builtin (is_object(input.resource)
// reads only the type), the item analysis did not look at input.resource,
// and the cache keyed without the URI: the decision made for the first URI
// answered the second (note b allowed with a).
func TestPolicyFunctionNamedLikeABuiltinDecidesPerURI(t *testing.T) {
	ctx := context.Background()
	for name, src := range map[string]string{
		"is_object":  `is_object(x) := startswith(x.uri, "custos://t/note/a")` + "\n" + `decision := {"allow": is_object(input.resource), "reasons": [], "obligations": []}`,
		"type_name":  `type_name(x) := x.uri` + "\n" + `decision := {"allow": type_name(input.resource) == "custos://t/note/a", "reasons": [], "obligations": []}`,
		"object.get": `object.get(x, _, _) := x.uri` + "\n" + `decision := {"allow": object.get(input.resource, "type", "") == "custos://t/note/a", "reasons": [], "obligations": []}`,
	} {
		e, err := Load(ctx, fstest.MapFS{"p.rego": {Data: []byte(uriModuleHead + src + "\n")}}, Options{Timeout: testTimeout})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		subj := NewSubject(clinician)
		for _, uri := range []string{"custos://t/note/a", "custos://t/note/b", "custos://t/note/a"} {
			r := resource("note", patientA)
			r.URI = uri
			d, err := e.Decide(ctx, Input{Subject: subj, PurposeOfUse: "TREAT", Action: ActionRead, Resource: r})
			if want := uri == "custos://t/note/a"; err != nil || d.Allow != want {
				t.Errorf("%s: %s: allow %v (%v), want %v (cache keyed without the URI: %v)", name, uri, d.Allow, err, want, !e.keyURI)
			}
		}
	}
}
