package minimize

import (
	"maps"
	"slices"

	"github.com/custos-mcp/custos/internal/fhirr4"
)

// A view is what JSON releases of a FHIR R4 resource once obligations
// other than deidentify (whose walk keeps R4 itself) have removed and
// masked parts of it. Those obligations work on JSON paths and know
// nothing of R4, so they leave what R4 forbids: an object whose members
// they removed ({} where a Reference held only a display: R4 ele-1, "All
// FHIR elements must have a @value or children"), an array with no item
// left, an empty string, a primitive's "_name" companion without its
// value, a local reference ("#sub1") to a contained resource they dropped
// (ref-1), a required element they emptied (Coverage.payor, 1..*).
// pruneView repairs them, by the R4 element table (fhirr4.Elements):
//
//   - an empty object, array or string goes, bottom up, so that an object
//     holding only emptied members goes too (and an Extension left
//     without a value or extensions: ext-1);
//   - a local reference that names no contained resource of its resource
//     goes ("#" alone names the resource itself and stays);
//   - a "_name" companion goes when it holds nothing (a removal takes a
//     value's companion with it, walk; one left without its value is
//     the source's: R4 lets a primitive hold extensions alone, a
//     data-absent-reason on _birthDate, and it stays); one of a repeating element
//     that is no longer as long as its values goes (it cannot be aligned
//     again), and a null value with no companion entry goes;
//   - a required element (minimum cardinality 1) missing from an object
//     the view keeps is marked withheld, as the research view marks one:
//     a data-absent-reason extension with code "masked", on the element
//     itself for a complex type ({"extension":[DAR]}, its own required
//     elements marked in turn) and on its "_name" companion for a
//     primitive. An object left with nothing is dropped rather than kept
//     as a marker, so its parent decides (an Encounter's participant with
//     an emptied individual goes; a Coverage's payor, required of the
//     resource, is marked).
//
// Every object of the resource is visited, so a required element the
// obligations removed outright is marked too; the importer (fhirin)
// refuses a resource that lacks one, so such an element was there and
// is withheld. A document whose root is no R4 resource is returned as
// it is. The view is labelled REDACTED in meta.security (labelRedacted).
// pruneView modifies the document in place.
func pruneView(root any) any {
	m, ok := root.(map[string]any)
	if !ok {
		return root
	}
	if rt, _ := m[resourceTypeMember].(string); !fhirr4.Resources[rt] {
		return root
	}
	pruneResource(m, nil)
	labelRedacted(m)
	return m
}

// redactedLabel is HL7's security label for a copy of a resource that
// was filtered to remove what the receiver may not access
// (v3-ObservationValue REDACTED, a security integrity observation value
// of R4's security-labels value set, to which Meta.security is bound):
// its usage note has it flag to the receiver that some of the resource
// was left out. A view is labelled whenever obligations other than
// deidentify apply to it, the policy's statement that it is a filtered
// copy, whether or not their paths matched anything of this resource.
var redactedLabel = map[string]any{"system": "http://terminology.hl7.org/CodeSystem/v3-ObservationValue", "code": "REDACTED"}

// labelRedacted adds redactedLabel to the meta.security of resource m,
// unless it is there already (or meta or its security is no JSON object
// or array: no shape R4 has, left as it is).
func labelRedacted(m map[string]any) {
	meta, ok := m["meta"].(map[string]any)
	if !ok {
		if _, there := m["meta"]; there {
			return
		}
		meta = map[string]any{}
		m["meta"] = meta
	}
	sec, ok := meta["security"].([]any)
	if !ok && meta["security"] != nil {
		return
	}
	for _, c := range sec {
		if cm, _ := c.(map[string]any); cm["system"] == redactedLabel["system"] && cm["code"] == redactedLabel["code"] {
			return
		}
	}
	meta["security"] = append(sec, maps.Clone(redactedLabel))
}

// pruneResource prunes the resource m. ids are the contained resources
// its local references may name: its container's for a contained
// resource, nil for a resource of its own (a root, a Bundle entry), which
// names its own.
func pruneResource(m map[string]any, ids map[string]bool) {
	if ids == nil {
		ids = containedIDs(m)
	}
	rt, _ := m[resourceTypeMember].(string)
	pruneObject(m, rt, fhirr4.Elements[rt], ids)
	markRequired(m, rt, fhirr4.Elements[rt])
}

// containedIDs returns the ids of m's contained resources.
func containedIDs(m map[string]any) map[string]bool {
	ids := map[string]bool{}
	for _, c := range asArray(m["contained"]) {
		cm, _ := c.(map[string]any)
		if id, _ := cm["id"].(string); id != "" {
			ids[id] = true
		}
	}
	return ids
}

// ViewVersion numbers what this package makes of a document: within one
// ViewVersion the same document under the same obligations gives the same
// view, byte for byte. It is bumped whenever a view changes (2: h-views,
// 2026-12-07, the prune and the REDACTED label; 3: h-typed, 2026-12-07, a
// mask, generalize or scrub leaves what the element's R4 type can hold:
// fit). A minimized view's entity
// tag hashes it (server), so a client's cached view is not taken for the
// one this version makes.
const ViewVersion = 3

// companionDefs are the elements of a primitive's "_name" companion (R4
// Element).
var companionDefs = map[string]fhirr4.Element{
	"id":                {Type: "string"},
	extensionMember:     {Type: "Extension", Many: true},
	"modifierExtension": {Type: "Extension", Many: true},
}

// pruneObject prunes the members of m, an object of type (or backbone
// element) key whose elements are defs (nil: a member R4 does not define,
// pruned by its JSON alone), and reports whether m keeps anything.
// Required elements are marked by the caller (markRequired), only for an
// object that stays.
func pruneObject(m map[string]any, key string, defs map[string]fhirr4.Element, ids map[string]bool) bool {
	if key == "Reference" {
		if r, _ := m["reference"].(string); len(r) > 1 && r[0] == '#' && !ids[r[1:]] {
			delete(m, "reference") // ref-1: names a contained resource the view dropped
		}
	}
	for k, v := range m {
		if k == resourceTypeMember && defs != nil {
			continue
		}
		e, typed := defs[k]
		if base, ok := cutCompanion(k); ok && defs != nil {
			if be, ok := defs[base]; ok && primitiveTypes[be.Type] {
				continue // companions after their values
			}
		}
		if nv, keep := pruneValue(v, e, typed, k, ids); keep {
			m[k] = nv
		} else {
			delete(m, k)
		}
	}
	if defs != nil {
		for k, v := range m {
			base, ok := cutCompanion(k)
			if !ok {
				continue
			}
			if e, ok := defs[base]; ok && primitiveTypes[e.Type] {
				pruneCompanion(m, k, base, v, ids)
			}
		}
		for k := range m {
			if e, ok := defs[k]; ok && e.Many && primitiveTypes[e.Type] {
				alignNulls(m, k)
			}
		}
	}
	if key == "Extension" && !extensionContent(m) {
		return false // ext-1: a value or extensions
	}
	return len(m) > 0
}

// pruneValue prunes v, the value of member name (of element e when typed),
// and reports whether it stays.
func pruneValue(v any, e fhirr4.Element, typed bool, name string, ids map[string]bool) (any, bool) {
	switch x := v.(type) {
	case []any:
		out := x[:0]
		for _, c := range x {
			if nv, keep := pruneOne(c, e, typed, name, ids); keep {
				out = append(out, nv)
			}
		}
		clear(x[len(out):])
		return out, len(out) > 0
	default:
		return pruneOne(v, e, typed, name, ids)
	}
}

// pruneOne prunes one value (an array's item, or a value that does not
// repeat). A null stays: in a primitive's array it is aligned with its
// companion (pruneCompanion, alignNulls), elsewhere it is no obligation's.
func pruneOne(v any, e fhirr4.Element, typed bool, name string, ids map[string]bool) (any, bool) {
	switch x := v.(type) {
	case string:
		return x, x != ""
	case map[string]any:
		if typed && e.Type == "Resource" {
			if _, ok := x[resourceTypeMember].(string); ok {
				if name != "contained" {
					ids = nil // a Bundle entry, a parameter: a resource of its own
				}
				pruneResource(x, ids)
				return x, true
			}
		}
		key := ""
		if typed {
			key = e.Type
		}
		defs := fhirr4.Elements[key]
		if !pruneObject(x, key, defs, ids) {
			return nil, false
		}
		markRequired(x, key, defs)
		return x, true
	case []any:
		return pruneValue(x, fhirr4.Element{}, false, name, ids) // no R4 shape: by its JSON
	}
	return v, true
}

// pruneCompanion prunes m[k], the "_name" companion of the primitive
// element base (e), whose value has been pruned already.
func pruneCompanion(m map[string]any, k, base string, v any, ids map[string]bool) {
	val, hasVal := m[base]
	switch c := v.(type) {
	case map[string]any:
		// A companion that still holds something stands alone: R4 lets a
		// primitive carry extensions without a value (a source's
		// data-absent-reason on _birthDate). A removal takes the
		// companion with its value (walk), so one left without its value
		// is the source's.
		if !pruneObject(c, "Element", companionDefs, ids) {
			delete(m, k)
		}
	case []any:
		vals, _ := val.([]any)
		if !hasVal || len(vals) != len(c) {
			delete(m, k)
			break
		}
		empty := true
		for i, x := range c {
			if cm, ok := x.(map[string]any); ok && !pruneObject(cm, "Element", companionDefs, ids) {
				c[i] = nil
			}
			if c[i] != nil {
				empty = false
			}
		}
		if empty {
			delete(m, k)
		}
	default:
		delete(m, k) // no Element: a shape no obligation makes
	}
}

// alignNulls drops the nulls of m[base], a repeating primitive's values,
// that no entry of its companion m["_"+base] stands for (R4 JSON writes a
// null only where the companion holds the value's id or extensions), and
// the companion's entries with them; and m[base] itself once no value is
// left.
func alignNulls(m map[string]any, base string) {
	vals, ok := m[base].([]any)
	if !ok || !slices.Contains(vals, nil) {
		return
	}
	comp, _ := m["_"+base].([]any)
	outV, outC := vals[:0], comp[:0]
	for i, x := range vals {
		var c any
		if comp != nil {
			c = comp[i]
		}
		if x == nil && c == nil {
			continue
		}
		outV = append(outV, x)
		if comp != nil {
			outC = append(outC, c)
		}
	}
	setValues(m, base, outV, outC) // outC is nil when comp is
}

// setValues sets m[base] to vals, the values of a repeating primitive,
// and its companion m["_"+base] to comp (aligned with vals) unless comp
// is nil; with no value left, it deletes both.
func setValues(m map[string]any, base string, vals, comp []any) {
	if len(vals) == 0 {
		delete(m, base)
		delete(m, "_"+base)
		return
	}
	m[base] = vals
	if comp != nil {
		m["_"+base] = comp
	}
}

// extensionContent reports whether the Extension m holds a value or
// extensions (R4 ext-1).
func extensionContent(m map[string]any) bool {
	for k := range m {
		if k == extensionMember || len(k) > 5 && k[:5] == "value" || len(k) > 6 && k[:6] == "_value" {
			return true
		}
	}
	return false
}

// cutCompanion returns name for "_name".
func cutCompanion(k string) (string, bool) {
	if len(k) > 1 && k[0] == '_' {
		return k[1:], true
	}
	return "", false
}

// requiredMarks are, by type (or backbone element) key, the required
// elements (minimum cardinality 1) to mark when missing: each required
// element by name, and of a required choice one type, a primitive one if
// it has one (the first in name order), as absentOf marks it. Built once
// from the R4 table; never modified.
var requiredMarks = func() map[string][]string {
	out := map[string][]string{}
	for key, defs := range fhirr4.Elements {
		marked := map[string]bool{}
		for _, k := range slices.Sorted(maps.Keys(defs)) {
			e := defs[k]
			if !e.Required || e.Choice != "" && (marked[e.Choice] || !primitiveTypes[e.Type] && choiceHasPrimitive(defs, e.Choice)) {
				continue
			}
			marked[e.Choice] = true
			out[key] = append(out[key], k)
		}
	}
	return out
}()

// markRequired marks each required element of m (of type key, elements
// defs) that m lacks, neither its value nor, for a primitive, its
// "_name" companion there (a choice: none of its types), withheld
// (markAbsent).
func markRequired(m map[string]any, key string, defs map[string]fhirr4.Element) {
	for _, k := range requiredMarks[key] {
		switch e := defs[k]; {
		case e.Type == "xhtml" && !present(m, k):
			// R4 JSON gives a narrative's div no companion to mark
			// (xhtml has no extensions): it says "***" itself.
			m[k] = maskedDiv
		case e.Choice == "" && !present(m, k) || e.Choice != "" && !choicePresent(m, defs, e.Choice):
			markAbsent(m, k, defs)
		}
	}
}

func present(m map[string]any, k string) bool {
	_, v := m[k]
	_, c := m["_"+k]
	return v || c
}

// choicePresent reports whether m holds one type of choice element
// choice (or its companion).
func choicePresent(m map[string]any, defs map[string]fhirr4.Element, choice string) bool {
	for k, e := range defs {
		if e.Choice == choice && present(m, k) {
			return true
		}
	}
	return false
}
