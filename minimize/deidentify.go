package minimize

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The deidentify obligation (OpDeidentify, Fn DeidentifySafeHarbor) is HIPAA
// Safe Harbor (45 CFR 164.514(b)(2)) for any FHIR R4 resource. Instead of
// naming the elements to keep, it walks every element and decides by the
// element's FHIR data type (fhirElements, generated from the R4
// StructureDefinitions by tools/fhirtypes), so that an identifier in an
// element the policy author did not foresee — CodeableConcept.text, a
// Coding.display, an extension under code, a date nested in a component —
// is withheld like any other. Where the type of an element is not known,
// the element is dropped (fail closed).
//
// What each type becomes (docs/policy.md, "Research view"):
//
//	boolean, integer, positiveInt,       kept
//	unsignedInt, decimal
//	code                                 kept, scrubbed (ScrubString)
//	date, dateTime                       the year ("YYYY", valid for both);
//	                                     birthDate: the year, or withheld
//	                                     (data-absent-reason "masked") when
//	                                     the age is over 89 at Options.Now
//	instant, time                        dropped
//	string, markdown                     dropped, except Quantity.unit and
//	                                     Address.state/country (scrubbed)
//	uri, url, canonical, oid, uuid, id,  dropped (Coding.system: kept when it
//	base64Binary, xhtml                  is a public terminology; see below)
//	Identifier, HumanName, ContactPoint, dropped
//	Annotation, Signature, Narrative,
//	Meta, Attachment (data, url, title,
//	hash: photos, documents)
//	Reference                            "Patient/<id>" becomes
//	                                     "Patient/<Options.Alias(id)>";
//	                                     "#local" is kept (renumbered); all
//	                                     else (display, identifier, other
//	                                     targets, absolute URLs) dropped
//	Coding                               dropped unless its system is a public
//	                                     terminology (terminologySystem);
//	                                     display and version dropped
//	Quantity and its kinds               value, comparator, unit kept; system
//	                                     and code only for UCUM and ISO 4217;
//	                                     an Age over 89 is dropped
//	Address                              state, country, ZIP3 of postalCode
//	                                     ("000" for the restricted ZIP3s)
//	Extension, modifierExtension         dropped unless its url is in
//	                                     allowedExtensions; an element with an
//	                                     unknown modifierExtension is dropped
//	                                     whole, a resource with one withheld
//	Resource (contained, Bundle entries) de-identified recursively; contained
//	                                     ids renumbered "c1", "c2", ...
//	other complex types, backbones       walked element by element
//
// An object left empty is dropped. A required element (minimum cardinality
// 1) that the walk dropped is replaced by a data-absent-reason extension
// with code "masked", so the output stays valid FHIR R4: a complex element
// becomes {"extension":[DAR]}, a primitive keeps only its "_name" companion
// {"extension":[DAR]}.

// dataAbsentReason is the URL of the core extension that says why a value
// is missing; custos writes it with code "masked" ("the information is not
// available due to security, privacy or related reasons").
const dataAbsentReason = "http://hl7.org/fhir/StructureDefinition/data-absent-reason"

// allowedExtensions are the extensions (and modifier extensions) the
// deidentify walk keeps, by URL; their values are walked by type like any
// other element. Every other extension is dropped. An extension belongs
// here only if no value it can carry identifies anyone.
var allowedExtensions = map[string]bool{
	dataAbsentReason: true, // a code saying why a value is missing
	"http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex": true, // valueCode F, M, UNK
}

// AllowedExtensions returns, sorted, the extension URLs the deidentify
// obligation keeps (a fresh copy).
func AllowedExtensions() []string { return slices.Sorted(maps.Keys(allowedExtensions)) }

// terminologySystems are the code systems whose codings the deidentify
// walk keeps: public vocabularies, whose codes name concepts, not people.
// A Coding of any other system (a local code system, or an identifier
// system misused as one) is dropped: its code may be a local identifier.
var terminologySystems = map[string]bool{
	"http://loinc.org":                            true,
	"http://snomed.info/sct":                      true,
	"http://hl7.org/fhir/sid/icd-10":              true,
	"http://hl7.org/fhir/sid/icd-10-cm":           true,
	"http://hl7.org/fhir/sid/icd-9-cm":            true,
	"http://hl7.org/fhir/sid/cvx":                 true,
	"http://hl7.org/fhir/sid/ndc":                 true,
	"http://www.nlm.nih.gov/research/umls/rxnorm": true,
	"http://www.ama-assn.org/go/cpt":              true,
	"http://nucc.org/provider-taxonomy":           true,
	"http://unitsofmeasure.org":                   true,
	"urn:ietf:bcp:47":                             true,
	"urn:iso:std:iso:3166":                        true,
	"urn:iso:std:iso:4217":                        true,
}

// terminologyPrefix: HL7's own code systems (v2 tables, v3 code systems,
// FHIR terminology), e.g. http://terminology.hl7.org/CodeSystem/v3-ActCode.
const terminologyPrefix = "http://terminology.hl7.org/CodeSystem/"

func terminologySystem(s string) bool {
	return terminologySystems[s] || strings.HasPrefix(s, terminologyPrefix) && len(s) > len(terminologyPrefix)
}

// quantitySystems are the Quantity.system values kept (with the code).
var quantitySystems = map[string]bool{"http://unitsofmeasure.org": true, "urn:iso:std:iso:4217": true}

// keptStrings are the string elements the walk keeps (scrubbed), by
// "<type>.<element>": units, nothing that names. (Address keeps state and
// country: see address.)
var keptStrings = map[string]bool{
	"Quantity.unit": true, "Age.unit": true, "Count.unit": true, "Distance.unit": true,
	"Duration.unit": true, "MoneyQuantity.unit": true, "SimpleQuantity.unit": true,
}

// droppedTypes are the types the walk drops whole.
var droppedTypes = map[string]bool{
	"instant": true, "time": true, "uri": true, "url": true, "canonical": true, "oid": true,
	"uuid": true, "id": true, "base64Binary": true, "xhtml": true, "string": true, "markdown": true,
	"Identifier": true, "HumanName": true, "ContactPoint": true, "Annotation": true,
	"Signature": true, "Narrative": true, "Meta": true, "Attachment": true,
}

// primitiveTypes are the FHIR primitive types (JSON scalars, with a "_name"
// companion for their id and extensions).
var primitiveTypes = map[string]bool{
	"boolean": true, "integer": true, "integer64": true, "positiveInt": true, "unsignedInt": true,
	"decimal": true, "code": true, "date": true, "dateTime": true, "instant": true, "time": true,
	"string": true, "markdown": true, "uri": true, "url": true, "canonical": true, "oid": true,
	"uuid": true, "id": true, "base64Binary": true, "xhtml": true,
}

// fhirID is the syntax of a FHIR logical id.
var fhirID = regexp.MustCompile(`^[A-Za-z0-9\-.]{1,64}$`)

// deid is the state of one resource's walk.
type deid struct {
	now   time.Time
	alias func(string) string
	// contained maps the id of each contained resource that is released to
	// its new id; localRefs are the new ids some released reference names.
	contained map[string]string
	localRefs map[string]bool
}

// deidentify applies the deidentify obligation to a decoded document. The
// document must be a FHIR resource of a known type; anything else, and a
// resource carrying a modifier extension custos does not know, is withheld
// (ErrWithheld).
func deidentify(root any, opts Options) (any, error) {
	m, ok := root.(map[string]any)
	if !ok {
		return nil, ErrWithheld
	}
	d := &deid{now: opts.Now, alias: opts.Alias}
	out, ok := d.topResource(m)
	if !ok {
		return nil, ErrWithheld
	}
	return out, nil
}

// topResource de-identifies a resource that is not contained: it numbers
// the contained resources that will be released, walks everything, and
// then drops contained resources no released reference names (FHIR
// invariant dom-3).
func (d *deid) topResource(m map[string]any) (map[string]any, bool) {
	d.contained, d.localRefs = map[string]string{}, map[string]bool{}
	n := 0
	for _, c := range asArray(m["contained"]) {
		cm, _ := c.(map[string]any)
		id, _ := cm["id"].(string)
		rt, _ := cm["resourceType"].(string)
		if id != "" && fhirResources[rt] && !unknownModifier(cm) {
			n++
			d.contained[id] = "c" + strconv.Itoa(n)
		}
	}
	out, ok := d.resource(m, false)
	if !ok {
		return nil, false
	}
	if cs, ok := out["contained"].([]any); ok {
		kept := cs[:0]
		for _, c := range cs {
			if id, _ := c.(map[string]any)["id"].(string); d.localRefs[id] {
				kept = append(kept, c)
			}
		}
		if len(kept) == 0 {
			delete(out, "contained")
		} else {
			out["contained"] = kept
		}
	}
	return out, true
}

// resource de-identifies one resource; a contained one keeps its new id.
func (d *deid) resource(m map[string]any, contained bool) (map[string]any, bool) {
	rt, _ := m["resourceType"].(string)
	if !fhirResources[rt] {
		return nil, false
	}
	out, ok := d.object(m, rt)
	if !ok {
		return nil, false
	}
	out["resourceType"] = rt
	if contained {
		id, _ := m["id"].(string)
		nid, ok := d.contained[id]
		if !ok {
			return nil, false
		}
		out["id"] = nid
	}
	return out, true
}

// unknownModifier reports whether m carries a modifier extension that is
// not allowed: FHIR forbids processing such an element as if it were not
// there, so the walk drops the element (or withholds the resource).
func unknownModifier(m map[string]any) bool {
	for _, x := range asArray(m["modifierExtension"]) {
		xm, _ := x.(map[string]any)
		if u, _ := xm["url"].(string); !allowedExtensions[u] {
			return true
		}
	}
	return false
}

// object walks the elements of an object of type (or backbone path) key.
// It reports false when the object must be dropped whole: its type is
// unknown, or it carries an unknown modifier extension. The result may be
// empty.
func (d *deid) object(m map[string]any, key string) (map[string]any, bool) {
	defs := fhirElements[key]
	if defs == nil || unknownModifier(m) {
		return nil, false
	}
	out := make(map[string]any, len(m))
	var dropped []string // required elements the walk dropped
	for k, v := range m {
		e, ok := defs[k]
		if !ok {
			continue // resourceType, "_name" companions, unknown elements: fail closed
		}
		if k == "birthDate" && e.typ == "date" {
			if y, ok := generalizeBirthYear(v, d.now).(string); ok && len(y) == 4 && y != masked {
				out[k] = y
			} else {
				out["_"+k] = absent()
			}
			continue
		}
		if nv, keep := d.element(key, k, e, v); keep {
			out[k] = nv
		} else if e.required {
			dropped = append(dropped, k)
		}
	}
	for _, k := range dropped {
		markAbsent(out, k, defs)
	}
	return out, true
}

// element walks the value of one element, an array if the element repeats.
func (d *deid) element(parent, name string, e fhirElement, v any) (any, bool) {
	if !e.many {
		return d.value(parent, name, e.typ, v)
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]any, 0, len(arr))
	for _, x := range arr {
		if nv, ok := d.value(parent, name, e.typ, x); ok {
			out = append(out, nv)
		}
	}
	return out, len(out) > 0
}

// value walks one value of FHIR type typ (element name of type parent).
func (d *deid) value(parent, name, typ string, v any) (any, bool) {
	if droppedTypes[typ] {
		if (typ == "string" || typ == "markdown") && keptStrings[parent+"."+name] {
			s, ok := v.(string)
			return ScrubString(s), ok && s != ""
		}
		return nil, false
	}
	switch typ {
	case "boolean":
		_, ok := v.(bool)
		return v, ok
	case "integer", "integer64", "positiveInt", "unsignedInt", "decimal":
		_, ok := v.(json.Number)
		return v, ok
	case "code":
		s, ok := v.(string)
		return ScrubString(s), ok && s != ""
	case "date", "dateTime":
		s, _ := v.(string)
		m := fhirDate.FindStringSubmatch(s)
		if m == nil {
			return nil, false
		}
		return m[1], true
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	var out map[string]any
	switch typ {
	case "Resource":
		if name == "contained" {
			out, ok = d.resource(m, true)
		} else { // a resource of its own (Bundle.entry.resource, Parameters)
			out, ok = (&deid{now: d.now, alias: d.alias}).topResource(m)
		}
	case "Reference":
		out, ok = d.reference(m), true
	case "Coding":
		out, ok = d.coding(m)
	case "Quantity", "Age", "Count", "Distance", "Duration", "SimpleQuantity", "MoneyQuantity":
		out, ok = d.quantity(m, typ)
	case "Address":
		out, ok = d.address(m)
	case "Extension":
		out, ok = d.extension(m)
	default:
		out, ok = d.object(m, typ)
	}
	return out, ok && len(out) > 0
}

// reference keeps only a reference custos can say without identifying
// anyone: the caller's alias of a patient, or a local reference to a
// released contained resource.
func (d *deid) reference(m map[string]any) map[string]any {
	ref, _ := m["reference"].(string)
	switch {
	case ref == "#": // the containing resource
		return map[string]any{"reference": ref}
	case strings.HasPrefix(ref, "#"):
		if n, ok := d.contained[ref[1:]]; ok {
			d.localRefs[n] = true
			return map[string]any{"reference": "#" + n}
		}
	case d.alias != nil:
		if id, ok := strings.CutPrefix(ref, "Patient/"); ok && fhirID.MatchString(id) {
			if a := d.alias(id); fhirID.MatchString(a) {
				return map[string]any{"reference": "Patient/" + a}
			}
		}
	}
	return nil
}

// coding keeps a coding of a public terminology: system, code,
// userSelected.
func (d *deid) coding(m map[string]any) (map[string]any, bool) {
	sys, _ := m["system"].(string)
	if !terminologySystem(sys) {
		return nil, false
	}
	out, ok := d.object(m, "Coding")
	if !ok || out["code"] == nil {
		return nil, false
	}
	out["system"] = sys
	return out, true
}

// quantity keeps value, comparator and unit, and system and code only for
// UCUM and ISO 4217 (FHIR qty-3: a code needs its system). An age over 89
// is dropped (Safe Harbor aggregates ages over 89).
func (d *deid) quantity(m map[string]any, typ string) (map[string]any, bool) {
	out, ok := d.object(m, typ)
	if !ok {
		return nil, false
	}
	if sys, _ := m["system"].(string); quantitySystems[sys] && out["code"] != nil {
		out["system"] = sys
	} else {
		delete(out, "code")
	}
	if typ == "Age" {
		if n, ok := out["value"].(json.Number); !ok || generalizeAge(n) == over89 || generalizeAge(n) == masked {
			return nil, false
		}
	}
	return out, true
}

// address keeps the state, the country and the ZIP3 of a US ZIP code
// ("000" for the restricted prefixes), nothing else; a postal code of
// another form is dropped.
func (d *deid) address(m map[string]any) (map[string]any, bool) {
	if unknownModifier(m) {
		return nil, false
	}
	out := map[string]any{}
	for _, k := range []string{"state", "country"} {
		if s, ok := m[k].(string); ok && s != "" {
			out[k] = ScrubString(s)
		}
	}
	if z, ok := generalize(GeneralizeZIP3, m["postalCode"], d.now).(string); ok && z != masked {
		out["postalCode"] = z
	}
	return out, true
}

// extension keeps an allowed extension, its value walked by type.
func (d *deid) extension(m map[string]any) (map[string]any, bool) {
	u, _ := m["url"].(string)
	if !allowedExtensions[u] {
		return nil, false
	}
	out, ok := d.object(m, "Extension")
	if !ok || len(out) == 0 { // FHIR ext-1: a value or extensions
		return nil, false
	}
	delete(out, "_url") // the walk drops uris; url is put back
	out["url"] = u
	return out, true
}

// absent is a data-absent-reason extension "masked", as an element.
func absent() map[string]any {
	return map[string]any{"extension": []any{map[string]any{"url": dataAbsentReason, "valueCode": "masked"}}}
}

// markAbsent stands in for required element name, which the walk dropped:
// {"extension":[DAR]} for a complex element, the "_name" companion for a
// primitive. A choice element already present under another type needs
// nothing.
func markAbsent(out map[string]any, name string, defs map[string]fhirElement) {
	e := defs[name]
	if e.choice != "" {
		for k, o := range defs {
			if _, ok := out[k]; ok && o.choice == e.choice {
				return
			}
		}
	}
	var v any = absent()
	if e.many {
		v = []any{v}
	}
	if !primitiveTypes[e.typ] {
		out[name] = v
		return
	}
	if e.many {
		out[name] = []any{nil}
	}
	out["_"+name] = v
}

func asArray(v any) []any {
	a, _ := v.([]any)
	return a
}
