package policy

import (
	"context"
	"testing"
	"testing/fstest"

	"github.com/open-policy-agent/opa/v1/ast"
)

// itemModuleHead opens the policies of itemURICases.
const itemModuleHead = "package custos.authz\n\ndecision := {\"allow\": true, \"reasons\": [], \"obligations\": []}\n\n"

// itemURICases are list rules (after itemModuleHead) and whether one can
// read a list item's uri: TestReadsItemURI, and the reference corpus of
// TestURIAnalysisIsAtLeastAsConservative.
var itemURICases = []struct {
	name, rules string
	reads       bool
}{
	{"no decisions rule", "", false},
	{"fields by name", `decisions := [d | some item in input.items; d := {"allow": item.resource.type == "x", "reasons": [], "obligations": []}]`, false},
	{"fields through a function", `decisions := ds(input.items)
ds(items) := [f(r.type, item.break_glass) | some item in items; r := item.resource]
f(t, bg) := {"allow": t == "x", "reasons": [], "obligations": []}`, false},
	{"object.get of another field", `decisions := [d | some item in input.items; d := {"allow": object.get(item, ["resource", "type"], "") == "x", "reasons": [], "obligations": []}]`, false},
	{"count of the items", `decisions := [{"allow": count(input.items) > 1, "reasons": [], "obligations": []} | some _ in input.items]`, false},

	{"items[_].resource.uri", `denied contains i if { some i; startswith(input.items[i].resource.uri, "x") }
decisions := [{"allow": i in denied, "reasons": [], "obligations": []} | some i, _ in input.items]`, true},
	{"through a variable", `decisions := [d | some item in input.items; r := item.resource; d := {"allow": startswith(r.uri, "x"), "reasons": [], "obligations": []}]`, true},
	{"through a function", `decisions := ds(input.items)
ds(items) := [f(item) | some item in items]
f(item) := {"allow": startswith(item.resource.uri, "x"), "reasons": [], "obligations": []}`, true},
	{"through an imported alias", `import input.items as its
decisions := [{"allow": startswith(x.resource.uri, "x"), "reasons": [], "obligations": []} | some x in its]`, true},
	{"through every", `ok if every item in input.items { not startswith(item.resource.uri, "x") }
decisions := [{"allow": ok, "reasons": [], "obligations": []} | some _ in input.items]`, true},
	{"object.get with the path", `decisions := [{"allow": object.get(item, ["resource", "uri"], "") == "x", "reasons": [], "obligations": []} | some item in input.items]`, true},
	{"object.get step by step", `decisions := [{"allow": object.get(object.get(item, "resource", {}), "uri", "") == "x", "reasons": [], "obligations": []} | some item in input.items]`, true},
	{"a dynamic key", `decisions := [{"allow": item.resource[k] == "x", "reasons": [], "obligations": []} | some item in input.items; k := "uri"]`, true},
	{"input[x]", `decisions := [{"allow": input[k][_].resource.type == "x", "reasons": [], "obligations": []} | some _ in input.items; k := "items"]`, true},
	{"walk(input)", `decisions := [{"allow": count(ps) > 0, "reasons": [], "obligations": []} | some _ in input.items; ps := [p | walk(input, [p, v]); v == "x"]]`, true},
	{"input.items whole to a builtin", `decisions := [{"allow": contains(json.marshal(input.items), "x"), "reasons": [], "obligations": []} | some _ in input.items]`, true},
	{"the input whole to a function", `decisions := g(input)
g(doc) := [{"allow": startswith(item.resource.uri, "x"), "reasons": [], "obligations": []} | some item in doc.items]`, true},
	{"an item compared", `decisions := [{"allow": item == {"resource": {"uri": "x"}}, "reasons": [], "obligations": []} | some item in input.items]`, true},
	{"a resource in a built object", `decisions := [h({"r": item.resource}) | some item in input.items]
h(o) := {"allow": startswith(o.r.uri, "x"), "reasons": [], "obligations": []}`, true},
	{"a rule's value holds the items", `its := input.items
decisions := [{"allow": startswith(x.resource.uri, "x"), "reasons": [], "obligations": []} | some x in its]`, true},
	{"a function returns the resource", `res(item) := item.resource
decisions := [{"allow": startswith(res(item).uri, "x"), "reasons": [], "obligations": []} | some item in input.items]`, true},
	{"in an else branch", `decisions := [f(item) | some item in input.items]
f(item) := {"allow": false, "reasons": ["t"], "obligations": []} if item.resource.type == "x" else := {"allow": startswith(item.resource.uri, "x"), "reasons": [], "obligations": []}`, true},
	{"a function replaced by with", `decisions := [d | some item in input.items; d := safe(item) with safe as leak]
safe(item) := {"allow": item.resource.type == "x", "reasons": [], "obligations": []}
leak(item) := {"allow": startswith(item.resource.uri, "x"), "reasons": [], "obligations": []}`, true},
	{"a with on the input", `decisions := [d | some item in input.items; d := decision with input.resource as item.resource]`, true},
	// h-review45's attempts to fool it (each found):
	{"input.items[i] by index", `decisions := [{"allow": startswith(input.items[i].resource.uri, "x"), "reasons": [], "obligations": []} | some i, _ in input.items]`, true},
	{"array.slice of the items", `decisions := [{"allow": startswith(it.resource.uri, "x"), "reasons": [], "obligations": []} | some it in array.slice(input.items, 0, 100)]`, true},
	{"unification with the items", `decisions := [{"allow": startswith(a.resource.uri, "x"), "reasons": [], "obligations": []} | [a] := input.items]`, true},
	{"an item matched against a pattern", `decisions := [{"allow": startswith(r.uri, "x"), "reasons": [], "obligations": []} | some i; input.items[i] = {"resource": r, "break_glass": _}]`, true},
	{"a partial set of items", `s contains it if some it in input.items
decisions := [{"allow": count(s) > 0, "reasons": [], "obligations": []} | some _ in input.items]`, true},
	{"a function with a default", `default f(_) := true
f(it) := false if startswith(it.resource.uri, "x")
decisions := [{"allow": f(it), "reasons": [], "obligations": []} | some it in input.items]`, true},
	{"sprintf of an item", `decisions := [{"allow": contains(sprintf("%v", [it]), "x"), "reasons": [], "obligations": []} | some it in input.items]`, true},
	{"a with on data", `decisions := [{"allow": ok, "reasons": [], "obligations": []} | some _ in input.items; ok := data.custos.authz.t with data.foo as 1]
t := true`, false}, // a value replacing data: a read until h-policy11 (any with was)
	{"object.keys of a resource", `decisions := [{"allow": "uri" in object.keys(it.resource), "reasons": [], "obligations": []} | some it in input.items]`, true},
	{"json.filter of an item", `decisions := [{"allow": json.filter(it, ["resource/uri"]) == {}, "reasons": [], "obligations": []} | some it in input.items]`, true},
	{"some k, v in a resource", `decisions := [{"allow": count([v | some _k, v in it.resource; v == "x"]) == 0, "reasons": [], "obligations": []} | some it in input.items]`, true},
	{"object.get with an item as default", `decisions := [{"allow": startswith(object.get({}, "nope", it.resource).uri, "x"), "reasons": [], "obligations": []} | some it in input.items]`, true},
	{"a call's result as a ref head", `decisions := [{"allow": startswith(object.get(input, "items", [])[i].resource.uri, "x"), "reasons": [], "obligations": []} | some i, _ in input.items]`, true},
	// A with on data by a value that reaches no URI changes nothing the
	// analysis follows (h-policy11; until then any with counted as a read).
	{"a rule replaced by a value", `decisions := [{"allow": ok, "reasons": [], "obligations": []} | some it in input.items; ok := typed(it) with data.custos.authz.wanted as "x"]
wanted := "y"
typed(it) if it.resource.type == wanted`, false},
	{"a rule replaced by an item", `decisions := [{"allow": ok, "reasons": [], "obligations": []} | some it in input.items; ok := data.custos.authz.t with data.custos.authz.cur as it]
cur := {}
t if startswith(cur.resource.uri, "x")`, true},
}

// TestReadsItemURI: the static analysis sees every way a rule can reach a
// list item's uri (input.items[i].resource.uri), through variables,
// functions, comprehensions, every, object.get and the input whole, and
// counts as a read what it cannot prove is none; it sees none in rules
// that read an item's other fields by name (the default policy's shape).
func TestReadsItemURI(t *testing.T) {
	for _, tc := range itemURICases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Load(context.Background(), fstest.MapFS{"p.rego": {Data: []byte(itemModuleHead + tc.rules + "\n")}}, Options{Timeout: testTimeout})
			if err != nil {
				t.Fatal(err)
			}
			if e.itemURI != tc.reads || e.keyURI != tc.reads {
				a, _ := analyse(parsedModules(t, e))
				t.Errorf("items carry uri %v, cache keys on it %v; want %v (analysis: %q)", e.itemURI, e.keyURI, tc.reads, a.why)
			}
		})
	}
}

// parsedModules parses the policy modules e was compiled from.
func parsedModules(t *testing.T, e *Engine) []*ast.Module {
	t.Helper()
	var mods []*ast.Module
	for _, f := range e.policies {
		m, err := ast.ParseModuleWithOpts(f.path, string(f.content), ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			t.Fatal(err)
		}
		mods = append(mods, m)
	}
	return mods
}
