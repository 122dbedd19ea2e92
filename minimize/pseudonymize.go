package minimize

import (
	"strings"

	"github.com/custos-mcp/custos/internal/fhirr4"
)

// pseudonymize applies pseudonymize:keyedid to a whole document: a FHIR
// R4 resource's logical id and every literal reference in it are renamed
// by key (Options.KeyID), the name the caller holds the resource by (for
// custos's server, the keyed id its URI carries). A source makes its ids
// as it likes, of national numbers too (gematik VSDM 2's
// VSDMCoverage-GKV-<KVNR>, an NHS number as a Patient's id, Synthea's MRN
// as the Patient's id); the keyed id says nothing without the key and is
// the id the reader already sees in the resource's URI, so references
// between resources it reads still join (a Claim's insurance.coverage and
// the Coverage).
//
// It walks the resource by the R4 element table (fhirr4.Elements), so
// that only Reference.reference is read as a reference (an
// ExplanationOfBenefit's related.reference is an Identifier):
//
//   - the resource's "id" (and a resource's of its own inside it: a
//     Bundle entry, a parameter) becomes key(resourceType, id), or goes
//     with its "_id" companion when key cannot name it; a contained
//     resource keeps its id, which is local to its container (#x);
//   - a Reference's "reference" of the form Type/id or
//     Type/id/_history/vid (Type an R4 resource type, id a FHIR id)
//     becomes "Type/" + key(Type, id) (the source's version goes: the
//     custos URI names the resource, not one of the source's versions);
//     any other (an absolute URL, a urn:uuid: or urn:oid:, a conditional
//     Type?identifier=…, a local #x, a Type/id key cannot name, a value
//     that is no string) goes with its "_reference" companion, so that
//     the Reference keeps its type (or nothing: the view's prune then
//     drops it, or marks a required one withheld);
//   - an object whose member R4 does not define is walked by its JSON, and
//     a member "reference" in it is read as a Reference's (fail closed).
//
// A result of key that is not a FHIR id counts as not named. A document
// that is no R4 resource is returned as it is. Other elements that may
// hold a source's id (a Bundle entry's fullUrl, an identifier, a
// canonical) are not its concern: the policy removes or masks them.
// pseudonymize modifies the document in place.
func pseudonymize(root any, key func(typ, id string) (string, bool)) any {
	m, ok := root.(map[string]any)
	if !ok {
		return root
	}
	if rt, _ := m[resourceTypeMember].(string); !fhirr4.Resources[rt] {
		return root
	}
	pseudonymizeResource(m, key, false)
	return m
}

// pseudonymizeResource renames the id of resource m (unless contained)
// and the references in it.
func pseudonymizeResource(m map[string]any, key func(typ, id string) (string, bool), contained bool) {
	rt, _ := m[resourceTypeMember].(string)
	if !contained {
		if _, there := m["id"]; there {
			id, _ := m["id"].(string)
			if k, ok := keyedID(key, rt, id); ok {
				m["id"] = k
			} else {
				delete(m, "id")
				delete(m, "_id")
			}
		}
	}
	pseudonymizeObject(m, rt, fhirr4.Elements[rt], key)
}

// pseudonymizeObject walks m, an object of type (or backbone element)
// typ whose elements are defs (nil: untyped, walked by its JSON).
func pseudonymizeObject(m map[string]any, typ string, defs map[string]fhirr4.Element, key func(typ, id string) (string, bool)) {
	if typ == "Reference" || defs == nil {
		if v, there := m["reference"]; there {
			r, _ := v.(string)
			if nr, ok := keyedReference(key, r); ok {
				m["reference"] = nr
			} else {
				delete(m, "reference")
				delete(m, "_reference")
			}
		}
	}
	for k, v := range m {
		if k == resourceTypeMember && defs != nil {
			continue
		}
		e, typed := defs[k]
		for _, c := range eachValue(v) {
			cm, ok := c.(map[string]any)
			if !ok {
				continue
			}
			switch {
			case typed && e.Type == "Resource":
				if rt, _ := cm[resourceTypeMember].(string); fhirr4.Resources[rt] {
					pseudonymizeResource(cm, key, k == "contained")
					continue
				}
				pseudonymizeObject(cm, "", nil, key)
			case typed:
				pseudonymizeObject(cm, e.Type, fhirr4.Elements[e.Type], key)
			default:
				pseudonymizeObject(cm, "", nil, key)
			}
		}
	}
}

// keyedReference is the reference r renamed by key, and whether it could be:
// Type/id or Type/id/_history/vid with Type an R4 resource type and id a
// FHIR id that key names. Anything else (absolute, urn:, conditional,
// local, empty) cannot be.
func keyedReference(key func(typ, id string) (string, bool), r string) (string, bool) {
	parts := strings.Split(r, "/")
	switch {
	case len(parts) == 2:
	case len(parts) == 4 && parts[2] == "_history" && fhirID.MatchString(parts[3]):
	default:
		return "", false
	}
	typ, id := parts[0], parts[1]
	if !fhirr4.Resources[typ] {
		return "", false
	}
	k, ok := keyedID(key, typ, id)
	if !ok {
		return "", false
	}
	return typ + "/" + k, true
}

// keyedID is key(typ, id) when id is a FHIR id and key names it by one.
func keyedID(key func(typ, id string) (string, bool), typ, id string) (string, bool) {
	if !fhirID.MatchString(id) {
		return "", false
	}
	k, ok := key(typ, id)
	if !ok || !fhirID.MatchString(k) {
		return "", false
	}
	return k, true
}

// eachValue is the items of an array, or v alone.
func eachValue(v any) []any {
	if a, ok := v.([]any); ok {
		return a
	}
	return []any{v}
}
