package minimize

import (
	"errors"
	"strings"
)

// allowNode is one level of a parsed allow-list: the member names (or "*"
// for every array element) that may be kept below it. keep means the value
// is listed itself and is kept whole.
type allowNode struct {
	keep     bool
	children map[string]*allowNode
}

var errBadAllowFn = errors.New("bad allow fn")

// parseAllowFn parses an allow Fn: a comma-separated list of one or more
// JSON pointers, each non-empty (not ""), relative to the values the
// obligation's Path selects. No spaces are trimmed and no element may be
// empty. A member name containing "," cannot be listed (FHIR element names
// never do).
func parseAllowFn(fn string) (*allowNode, error) {
	if fn == "" {
		return nil, errBadAllowFn
	}
	root := &allowNode{}
	for _, p := range strings.Split(fn, ",") {
		if p == "" {
			return nil, errBadAllowFn // "" would keep everything: no minimization at all
		}
		segs, err := parsePointer(p)
		if err != nil {
			return nil, errBadAllowFn
		}
		n := root
		for _, s := range segs {
			c := n.children[s]
			if c == nil {
				if n.children == nil {
					n.children = map[string]*allowNode{}
				}
				c = &allowNode{}
				n.children[s] = c
			}
			n = c
		}
		n.keep = true
	}
	return root, nil
}

// validAllowFn reports whether fn is a valid allow Fn, as parseAllowFn
// would, without building anything: Validate runs on every policy decision.
func validAllowFn(fn string) bool {
	if fn == "" {
		return false
	}
	for p := range strings.SplitSeq(fn, ",") {
		if !validPointer(p) || p == "" {
			return false
		}
	}
	return true
}

// validPointer reports whether parsePointer would accept p.
func validPointer(p string) bool {
	if p == "" {
		return true
	}
	if p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] != '~' {
			continue
		}
		if i+1 >= len(p) || (p[i+1] != '0' && p[i+1] != '1') {
			return false
		}
		i++
	}
	return true
}

// resourceTypeMember is kept in every object an allow obligation is applied
// to, listed or not: it says what the document is, not whom it is about.
const resourceTypeMember = "resourceType"

// allowValue applies a parsed allow-list to one value selected by the
// obligation's path. An object keeps resourceType and its listed members;
// anything else is projected like a nested value. It reports remove for a
// value that cannot hold any listed element (a scalar or an array where
// object members were listed).
func allowValue(v any, root *allowNode) (any, bool) {
	if m, ok := v.(map[string]any); ok {
		rt, hasRT := m[resourceTypeMember]
		nv, _ := project(m, root) // an object is never removed
		out := nv.(map[string]any)
		if hasRT {
			out[resourceTypeMember] = rt
		}
		return out, false
	}
	return project(v, root)
}

// project keeps the parts of v that n lists. It modifies containers in place
// (they belong to the decoded document) and reports remove when v holds
// nothing n lists:
//
//   - n.keep: v is kept whole;
//   - object: members named by n's children are projected, others deleted;
//     the object itself is kept, possibly empty;
//   - array: only the child "*" applies (it selects every element); each
//     element is projected, removed ones are dropped; without "*" the array
//     is removed. Index segments never select array elements, so an
//     allow-list is idempotent and cannot reorder anything;
//   - any other value (string, number, boolean, null) is removed, because n
//     lists elements below it, not the value itself.
//
// A listed value is kept whole but for its extensions (withoutExtensions),
// unless the listed member is itself an "extension" or a
// "modifierExtension" (kept with its own extensions, as withoutExtensions
// keeps one inside a listed element).
func project(v any, n *allowNode) (any, bool) {
	if n.keep {
		return withoutExtensions(v), false
	}
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			cn := n.children[k]
			if cn == nil {
				delete(x, k)
				continue
			}
			if cn.keep && (k == extensionMember || k == modifierExtensionMember) {
				continue // listed by name: kept whole
			}
			nv, del := project(c, cn)
			if del {
				delete(x, k)
				continue
			}
			x[k] = nv
			if cn.keep {
				dropEmptyCompanion(x, k)
			}
		}
		return x, false
	case []any:
		cn := n.children["*"]
		if cn == nil {
			return nil, true
		}
		out := x[:0]
		for _, c := range x {
			if nv, del := project(c, cn); !del {
				out = append(out, nv)
			}
		}
		clear(x[len(out):]) // drop references to removed elements
		return out, false
	}
	return nil, true
}

// extensionMember is the FHIR element that holds extensions: an allow-list
// keeps one only where it names it.
const extensionMember = "extension"

// modifierExtensionMember holds a FHIR element's modifier extensions: kept
// whole wherever it is kept (withoutExtensions).
const modifierExtensionMember = "modifierExtension"

// withoutExtensions deletes every "extension" member below v, in place, and
// returns v: an extension is content outside the base specification that
// the allow-list's author cannot have foreseen (a name in
// Encounter.class.extension, a geolocation in an address, an account number
// in a Money's extension), so a listed element keeps what R4 defines of it
// and no extension unless the list names one. A "modifierExtension" is kept
// whole, its own extensions too: R4 forbids reading an element as if its
// modifier were absent, so a policy that keeps an element keeps its
// modifiers (or drops the element). A primitive's companion ("_status", a
// FHIR JSON object of id and extension) left empty is deleted, and an empty
// entry of a companion array becomes null (or the array is deleted when no
// entry is left), so the result stays valid FHIR JSON.
func withoutExtensions(v any) any {
	switch x := v.(type) {
	case map[string]any:
		delete(x, extensionMember)
		for k, c := range x {
			if k == modifierExtensionMember {
				continue
			}
			x[k] = withoutExtensions(c)
			dropEmptyCompanion(x, k)
		}
	case []any:
		for i, c := range x {
			x[i] = withoutExtensions(c)
		}
	}
	return v
}

// dropEmptyCompanion deletes m[k] when k names a primitive's companion
// ("_status") that holds nothing (an empty object, or an array of nothing
// but nulls once its empty objects are nulls).
func dropEmptyCompanion(m map[string]any, k string) {
	if len(k) < 2 || k[0] != '_' {
		return
	}
	switch cv := m[k].(type) {
	case map[string]any:
		if len(cv) == 0 {
			delete(m, k)
		}
	case []any:
		if emptyCompanions(cv) {
			delete(m, k)
		}
	}
}

// emptyCompanions turns each empty object of a primitive array's companion
// into null (FHIR JSON's placeholder) and reports whether nothing but nulls
// is left.
func emptyCompanions(a []any) bool {
	empty := true
	for i, c := range a {
		if m, ok := c.(map[string]any); ok && len(m) == 0 {
			a[i] = nil
		}
		if a[i] != nil {
			empty = false
		}
	}
	return empty
}
