package rego_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/custos-mcp/custos/internal/fhirr4"
)

// typedVisit is called by walkTyped for every value of an element: owner
// is the R4 type, resource or backbone (its key in fhirr4.Elements) whose
// element name is, el the element ("" Type for a member R4 does not
// define there: a "_name" companion or a foreign element), x one value
// (an array's items one by one), path where it is. It returns whether
// walkTyped descends into x.
type typedVisit func(owner, name string, el fhirr4.Element, x any, path string) (descend bool)

// walkTyped walks the resource m (decoded FHIR R4 JSON) by the R4 element
// types of internal/fhirr4, contained resources and Bundle entries
// included, in a stable order, calling visit for every value.
func walkTyped(m map[string]any, path string, visit typedVisit) {
	typ, _ := m["resourceType"].(string)
	if path == "" {
		path = typ
	}
	walkObject(m, typ, path, visit)
}

func walkObject(m map[string]any, typ, path string, visit typedVisit) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if k == "resourceType" {
			continue
		}
		el, ok := fhirr4.Elements[typ][k]
		if !ok {
			visit(typ, k, fhirr4.Element{}, m[k], path+"."+k)
			continue
		}
		for i, x := range asList(m[k]) {
			p := path + "." + k
			if el.Many {
				p = fmt.Sprintf("%s[%d]", p, i)
			}
			o, isObject := x.(map[string]any)
			if !visit(typ, k, el, x, p) || !isObject {
				continue
			}
			if el.Type == "Resource" {
				walkTyped(o, p, visit)
			} else if fhirr4.Elements[el.Type] != nil {
				walkObject(o, el.Type, p, visit)
			}
		}
	}
}

func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

// safeHarborProblems checks a research view (a de-identified FHIR R4
// resource, decoded with UseNumber) for the HIPAA Safe Harbor properties
// of docs/policy.md ("The Safe Harbor profile"), walking it by the R4
// element types of internal/fhirr4 (walkTyped), and returns each property
// it breaks (path and what). It is written apart from package minimize
// and calls none of its helpers: it states the properties, not the walk
// that makes them hold. alias is the patient's research alias ("" when
// the resource is in no compartment); nowYear the year of the reference
// instant.
//
// The properties:
//   - no value of type HumanName, ContactPoint, Identifier, Attachment,
//     Narrative, Annotation, Signature, Meta, xhtml, base64Binary,
//     instant or time, unless it is a data-absent-reason extension alone
//     (a required element withheld);
//   - no free text. The rule: every element of R4 type string or
//     markdown is free text (R4 gives a code, a number, a date or a
//     reference its own type; a string is what a person or a system
//     wrote), but a quantity's unit (Quantity, Age, Count, Distance,
//     Duration, MoneyQuantity, SimpleQuantity), which must read as a unit
//     (at most 32 characters, at most four words, no run of five digits
//     or more), an address's state, country and postal code (below), a
//     reference's reference (below) and an id (below);
//   - an Address holds state, country and, when its country is the US
//     (or none is given), a ZIP3 postalCode of three digits: nothing else;
//   - a date or dateTime is a year (YYYY) less than 90 years before
//     nowYear;
//   - an Age, or the value of an Observation of a LOINC age code, is no
//     more than 89 years (in years, months, weeks or days);
//   - a Reference holds a reference to Patient/<alias> or to a contained
//     resource ("#c<n>"), and a type (an R4 resource type): nothing else;
//   - no id but a contained resource's, renumbered "c<n>";
//   - a uri, url, canonical, oid, uuid or id element (a coding's system,
//     an extension's url, a quantity's system) is a known terminology or
//     FHIR canonical (knownCanonical);
//   - no member R4 does not define, and a "_name" companion only as a
//     data-absent-reason.
//
// Values copied from the source's identifiers, names, telecom and
// addresses are leakedSourceValues' to find.
func safeHarborProblems(view map[string]any, alias string, nowYear int) []string {
	var out []string
	fail := func(path, format string, args ...any) { out = append(out, path+": "+fmt.Sprintf(format, args...)) }
	typ, _ := view["resourceType"].(string)
	if !fhirr4.Resources[typ] {
		return []string{"no R4 resource type"}
	}
	parts := map[string]bool{} // the paths of race and ethnicity parts' urls raceProblems accepts
	walkTyped(view, "", func(owner, name string, el fhirr4.Element, x any, path string) bool {
		switch {
		case x == nil:
			return false
		case el.Type == "" && strings.HasPrefix(name, "_") && fhirr4.Elements[owner][name[1:]].Type != "":
			for _, c := range asList(x) {
				if c != nil && !absentReasonOnly(c) {
					fail(path, "a companion that is not a data-absent-reason alone")
				}
			}
			return false
		case el.Type == "":
			fail(path, "a member R4 does not define in %s", owner)
			return false
		case absentReasonOnly(x):
			return false
		case name == "id":
			if !fhirr4.Resources[owner] || !containedResourceID.MatchString(path) || !containedID.MatchString(fmt.Sprint(x)) {
				fail(path, "an id that is not a contained resource's c<n>")
			}
			return false
		}
		s, _ := x.(string)
		switch t := el.Type; {
		case shForbidden[t]:
			fail(path, "a value of type %s", t)
			return false
		case t == "string" || t == "markdown":
			switch {
			case owner == "Reference" && name == "reference":
				if (alias == "" || s != "Patient/"+alias) && !(strings.HasPrefix(s, "#") && containedID.MatchString(s[1:])) {
					fail(path, "a reference other than the patient's alias or a contained resource")
				}
			case shUnitTypes[owner] && name == "unit":
				if len(s) > 32 || len(strings.Fields(s)) > 4 || digitRun.MatchString(s) {
					fail(path, "a unit that does not read as one")
				}
			case owner == "Address" && (name == "state" || name == "country" || name == "postalCode"): // the Address's own check
			default:
				fail(path, "free text (%s)", t)
			}
		case t == "uri" || t == "url" || t == "canonical" || t == "oid" || t == "uuid" || t == "id":
			if parts[path] {
				break // "ombCategory", "detailed" (raceProblems)
			}
			if owner == "Reference" && name == "type" {
				if !fhirr4.Resources[s] {
					fail(path, "a reference type that is no R4 resource type")
				}
			} else if !knownCanonical(s) {
				fail(path, "a %s that is no known terminology or FHIR canonical: %s", t, s)
			}
		case t == "date" || t == "dateTime":
			y, err := strconv.Atoi(s)
			if len(s) != 4 || err != nil {
				fail(path, "a %s finer than a year", t)
			} else if nowYear-y >= 90 {
				fail(path, "a year 90 or more years ago")
			}
		case t == "Address":
			addressProblems(x, path, fail)
		case t == "Age":
			ageProblems(x, path, fail)
		case t == "Extension":
			raceProblems(x, path, parts, fail)
		case t == "Reference":
			for k := range x.(map[string]any) {
				if k != "reference" && k != "type" {
					fail(path+"."+k, "a reference element other than reference and type")
				}
			}
		}
		return true
	})
	walkTyped(view, "", func(owner, name string, el fhirr4.Element, x any, path string) bool {
		if o, ok := x.(map[string]any); ok && o["resourceType"] == "Observation" && observesAge(o) {
			for k, v := range o {
				if strings.HasPrefix(k, "value") {
					ageProblems(v, path+"."+k, fail)
				}
			}
		}
		return true
	})
	if typ == "Observation" && observesAge(view) {
		for k, v := range view {
			if strings.HasPrefix(k, "value") {
				ageProblems(v, typ+"."+k, fail)
			}
		}
	}
	return out
}

// raceExtensions are US Core's race and ethnicity extensions, which a
// research view keeps as their OMB categories and detailed codes of CDC
// Race & Ethnicity alone (docs/policy.md, "Extension allow-list").
var raceExtensions = map[string]bool{
	"http://hl7.org/fhir/us/core/StructureDefinition/us-core-race":      true,
	"http://hl7.org/fhir/us/core/StructureDefinition/us-core-ethnicity": true,
}

// raceProblems fails a race or ethnicity extension x (at path) that holds
// anything but its url and parts, each its url "ombCategory" or
// "detailed" and a valueCoding of CDC Race & Ethnicity, and records in
// parts the paths of the parts' urls it accepts (relative urls, which
// knownCanonical is not asked about). Their "text" part is free text.
func raceProblems(x any, path string, parts map[string]bool, fail func(path, format string, args ...any)) {
	m, _ := x.(map[string]any)
	if u, _ := m["url"].(string); !raceExtensions[u] {
		return
	}
	for k := range m {
		if k != "url" && k != "extension" {
			fail(path+"."+k, "a race or ethnicity extension's %s", k)
		}
	}
	for i, y := range asList(m["extension"]) {
		p := fmt.Sprintf("%s.extension[%d]", path, i)
		sub, _ := y.(map[string]any)
		c, _ := sub["valueCoding"].(map[string]any)
		if u := sub["url"]; len(sub) != 2 || u != "ombCategory" && u != "detailed" || c["system"] != "urn:oid:2.16.840.1.113883.6.238" {
			fail(p, "a race or ethnicity part other than an OMB category or detailed code of CDC Race & Ethnicity")
			continue
		}
		parts[p+".url"] = true
	}
}

// containedResourceID is the path of a contained resource's id.
var containedResourceID = regexp.MustCompile(`\.contained\[[0-9]+\]\.id$`)

var containedID = regexp.MustCompile(`^c[0-9]+$`)

// shForbidden are the R4 types a research view never holds.
var shForbidden = map[string]bool{
	"HumanName": true, "ContactPoint": true, "Identifier": true, "Attachment": true, "Narrative": true,
	"Annotation": true, "Signature": true, "Meta": true, "xhtml": true, "base64Binary": true, "instant": true, "time": true,
}

// shUnitTypes are the quantity types whose unit is kept.
var shUnitTypes = map[string]bool{"Quantity": true, "Age": true, "Count": true, "Distance": true, "Duration": true,
	"MoneyQuantity": true, "SimpleQuantity": true}

// digitRun is five digits or more in a row.
var digitRun = regexp.MustCompile(`[0-9]{5,}`)

func addressProblems(x any, path string, fail func(path, format string, args ...any)) {
	m, _ := x.(map[string]any)
	for k := range m {
		if k != "state" && k != "country" && k != "postalCode" {
			fail(path+"."+k, "an address element other than state, country and ZIP3")
		}
	}
	if z, ok := m["postalCode"].(string); ok {
		if len(z) != 3 || strings.Trim(z, "0123456789") != "" {
			fail(path+".postalCode", "a postal code that is no ZIP3")
		}
		if country, _ := m["country"].(string); country != "" && !usCountryNames[strings.ToUpper(country)] {
			fail(path+".postalCode", "a ZIP3 outside the US")
		}
	}
}

// usCountryNames are the United States' names in an Address.country (in
// capitals): its ISO 3166 codes and its name (mCODE's examples write
// "United States").
var usCountryNames = map[string]bool{"US": true, "USA": true, "UNITED STATES": true, "UNITED STATES OF AMERICA": true}

// ageLimit is 89 years in each unit of time an age is written in.
var ageLimit = map[string]float64{"a": 89, "yr": 89, "year": 89, "years": 89, "mo": 89 * 12, "month": 89 * 12, "months": 89 * 12,
	"wk": 89 * 52, "week": 89 * 52, "weeks": 89 * 52, "d": 89 * 365, "day": 89 * 365, "days": 89 * 365}

// ageProblems fails an age (a quantity) over 89 years; one in another
// unit, or none, over 89.
func ageProblems(x any, path string, fail func(path, format string, args ...any)) {
	q, _ := x.(map[string]any)
	n, ok := q["value"].(json.Number)
	if !ok {
		return
	}
	v, _ := n.Float64()
	unit, _ := q["code"].(string)
	if unit == "" {
		unit, _ = q["unit"].(string)
	}
	if lim, ok := ageLimit[strings.ToLower(unit)]; ok && v > lim || !ok && v > 89 {
		fail(path, "an age over 89")
	}
}

// ageCodes are LOINC's codes of an age (30525-0 Age, 21612-7 Age -
// Reported, 29553-5 Age calculated, 21611-9 Age - estimated).
var ageCodes = map[string]bool{"30525-0": true, "21612-7": true, "29553-5": true, "21611-9": true}

func observesAge(m map[string]any) bool {
	code, _ := m["code"].(map[string]any)
	cs, _ := code["coding"].([]any)
	for _, x := range cs {
		if cd, ok := x.(map[string]any); ok && ageCodes[fmt.Sprint(cd["code"])] {
			return true
		}
	}
	return false
}

// absentReasonOnly reports whether x is an object that holds nothing but
// data-absent-reason extensions: a required element withheld, its own
// required elements with it (a Signature's type, when and who), each a
// data-absent-reason alone.
func absentReasonOnly(x any) bool {
	o, ok := x.(map[string]any)
	if !ok || len(o) == 0 {
		return false
	}
	for k, v := range o {
		if k != "extension" {
			for _, y := range asList(v) {
				if !absentReasonOnly(y) {
					return false
				}
			}
			continue
		}
		exts, _ := v.([]any)
		if len(exts) != 1 {
			return false
		}
		e, _ := exts[0].(map[string]any)
		if _, code := e["valueCode"].(string); len(e) != 2 || e["url"] != "http://hl7.org/fhir/StructureDefinition/data-absent-reason" || !code {
			return false
		}
	}
	return true
}

// shTerminologies are the public terminologies a research view may name
// (docs/policy.md, "Coding"), BCP-13 (MIME types) and the extensions of
// docs/policy.md's allow-list that are not FHIR's own.
var shTerminologies = map[string]bool{
	"http://loinc.org": true, "http://snomed.info/sct": true, "http://unitsofmeasure.org": true,
	"http://www.nlm.nih.gov/research/umls/rxnorm": true, "http://hl7.org/fhir/sid/icd-10": true,
	"http://hl7.org/fhir/sid/icd-10-cm": true, "http://hl7.org/fhir/sid/icd-9-cm": true, "http://hl7.org/fhir/sid/cvx": true,
	"http://hl7.org/fhir/sid/ndc": true, "http://www.ama-assn.org/go/cpt": true, "http://nucc.org/provider-taxonomy": true,
	"urn:ietf:bcp:47": true, "urn:ietf:bcp:13": true, "urn:iso:std:iso:3166": true, "urn:iso:std:iso:4217": true,
	"http://dicom.nema.org/resources/ontology/DCM": true, "http://radlex.org": true, "http://www.radlex.org": true,
	// Oncology, genomics and pharmacy research's (since h-terms): NCI
	// Thesaurus, HGNC, the Sequence Ontology, ATC, CDC Race & Ethnicity,
	// the genomics reporting guide's TBD codes (ICD-O-3 is HL7's,
	// fhirCanonical).
	"http://ncicb.nci.nih.gov/xml/owl/EVS/Thesaurus.owl": true, "http://www.genenames.org": true,
	"http://www.sequenceontology.org": true, "http://www.whocc.no/atc": true, "urn:oid:2.16.840.1.113883.6.238": true,
	"http://hl7.org/fhir/uv/genomics-reporting/CodeSystem/tbd-codes-cs": true,
	// The extensions outside FHIR's own that docs/policy.md's extension
	// allow-list names (race and ethnicity: raceProblems judges their
	// parts).
	"http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex":  true,
	"http://hl7.org/fhir/us/core/StructureDefinition/us-core-race":      true,
	"http://hl7.org/fhir/us/core/StructureDefinition/us-core-ethnicity": true,
}

// fhirCanonical is one of HL7's code systems, or one of FHIR's own code
// systems or base profiles and extensions, by name: nothing under
// http://hl7.org/fhir/sid/ but shTerminologies.
var fhirCanonical = regexp.MustCompile(`^http://(terminology\.hl7\.org/CodeSystem/[A-Za-z0-9][A-Za-z0-9.\-]*|hl7\.org/fhir/([a-z][a-z0-9\-]*|StructureDefinition/[A-Za-z][A-Za-z0-9\-]*))$`)

func knownCanonical(s string) bool { return shTerminologies[s] || fhirCanonical.MatchString(s) }

// sourceValues returns what the source resource m (its contained
// resources included) says in its identifiers' values, names, telecom
// values and addresses (but state and country), found by the R4 types
// of its elements (walkTyped).
func sourceValues(m map[string]any) []string {
	var out []string
	walkTyped(m, "", func(_, _ string, el fhirr4.Element, x any, _ string) bool {
		o, _ := x.(map[string]any)
		switch el.Type {
		case "Identifier", "ContactPoint":
			out = appendStrings(out, o, "value")
		case "HumanName":
			out = appendStrings(out, o, "family", "given", "text")
		case "Address":
			out = appendStrings(out, o, "line", "city", "district", "postalCode", "text")
		}
		return true
	})
	return out
}

func appendStrings(out []string, o map[string]any, names ...string) []string {
	for _, n := range names {
		for _, v := range asList(o[n]) {
			if s, ok := v.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// leakedSourceValues returns the source values of src (sourceValues) that
// the view holds, but those in allowed. The view's text is the strings
// and numbers of its values (not its member names, nor its resourceType,
// nor the known canonicals of knownCanonical, public text); a source
// value of four characters or more is found in a string of it, a word of
// four letters or more of one (names, streets, towns) as a word of it,
// case aside, and its digits, when five or more, in the digits of a
// string or number of it.
func leakedSourceValues(src, view map[string]any, allowed []string) []string {
	var texts []string
	var collect func(x any)
	collect = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			for k, v := range x {
				if k != "resourceType" {
					collect(v)
				}
			}
		case []any:
			for _, v := range x {
				collect(v)
			}
		case string:
			if !knownCanonical(x) {
				texts = append(texts, x)
			}
		case json.Number:
			texts = append(texts, x.String())
		}
	}
	collect(view)
	words, digits := map[string]bool{}, []string{}
	for _, s := range texts {
		for _, w := range strings.FieldsFunc(s, notLetter) {
			words[strings.ToLower(w)] = true
		}
		if d := onlyDigits(s); d != "" {
			digits = append(digits, d)
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, v := range sourceValues(src) {
		if seen[v] || slices.Contains(allowed, v) {
			continue
		}
		seen[v] = true
		if len([]rune(v)) >= 4 && slices.ContainsFunc(texts, func(s string) bool { return strings.Contains(s, v) }) {
			out = append(out, fmt.Sprintf("holds the source's %q", v))
			continue
		}
		for _, w := range strings.FieldsFunc(v, notLetter) {
			if len([]rune(w)) >= 4 && words[strings.ToLower(w)] {
				out = append(out, fmt.Sprintf("holds %q of the source's %q", w, v))
			}
		}
		if d := onlyDigits(v); len(d) >= 5 && slices.ContainsFunc(digits, func(s string) bool { return strings.Contains(s, d) }) {
			out = append(out, fmt.Sprintf("holds the digits of the source's %q", v))
		}
	}
	return out
}

func notLetter(r rune) bool { return !unicode.IsLetter(r) }

func onlyDigits(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, s)
}

// billerProblems checks a biller's view (a FHIR R4 resource, decoded with
// UseNumber) against what docs/policy.md says the billing views drop,
// walking it by the R4 element types (walkTyped): names, telecom,
// addresses, attachments, narrative and notes (the types), contained
// resources, extensions (but a modifierExtension and a data-absent-reason
// alone), a reference's display (but an Encounter's service provider's,
// the facility's name) and identifier, a code's text and display, a
// claim's or remittance's free text (disposition, processNote), and an
// identifier's value unmasked (the claim, EOB and coverage identifiers
// keep their last four characters after "***").
func billerProblems(view map[string]any) []string {
	var out []string
	walkTyped(view, "", func(owner, name string, el fhirr4.Element, x any, path string) bool {
		bad := ""
		switch {
		case x == nil || absentReasonOnly(x):
			return false
		case billerForbidden[el.Type]:
			bad = "a value of type " + el.Type
		case name == "contained" || name == "disposition" || name == "processNote":
			bad = "an element the billing views drop"
		case name == "extension":
			bad = "an extension"
		case name == "modifierExtension":
			return false
		case owner == "Reference" && (name == "identifier" || name == "display" && !strings.HasPrefix(path, "Encounter.serviceProvider.")):
			bad = "a reference's " + name
		case owner == "CodeableConcept" && name == "text" || owner == "Coding" && name == "display":
			bad = "a code's " + name
		case owner == "Identifier" && name == "value":
			if s, _ := x.(string); !strings.HasPrefix(s, "***") {
				bad = "an identifier's value unmasked"
			}
		}
		if bad != "" {
			out = append(out, path+": "+bad)
			return false
		}
		return true
	})
	return out
}

// billerForbidden are the R4 types a biller's view never holds.
var billerForbidden = map[string]bool{"HumanName": true, "ContactPoint": true, "Address": true, "Attachment": true,
	"Narrative": true, "Annotation": true, "Signature": true}

// researchViewBase is a research view with every property (required
// elements withheld, a component of nothing but one and a Signature with
// its own, included): it must pass safeHarborProblems, and each of
// researchViewLeaks, an edit of it, must not.
const researchViewBase = `{"resourceType":"Observation","status":"final",` +
	`"code":{"coding":[{"system":"http://loinc.org","code":"8867-4"}]},"subject":{"reference":"Patient/ra1"},` +
	`"effectiveDateTime":"2019","valueQuantity":{"value":72,"unit":"/min","system":"http://unitsofmeasure.org","code":"/min"},` +
	`"_issued":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}]},` +
	`"contained":[` + withheldSignature + `,{"resourceType":"Patient","id":"c1","gender":"female","birthDate":"1950","address":[{"state":"MA","postalCode":"021","country":"US"}]}],` +
	`"performer":[{"reference":"#c1"}],` +
	`"component":[{"code":` + darJSON + `}]}`

// darJSON is a data-absent-reason extension alone.
const darJSON = `{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}]}`

// withheldSignature is a contained resource with a required Signature
// withheld as the research walk writes it (Contract-C-2121's signer):
// its own required elements marked too.
const withheldSignature = `{"resourceType":"Provenance","id":"c2","signature":[{"_when":` + darJSON + `,"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}],"type":[` + darJSON + `],"who":` + darJSON + `}]}`

// researchViewAccepted are edits of researchViewBase (old, new) that keep
// every Safe Harbor property.
var researchViewAccepted = []struct{ old, new string }{
	{`"country":"US"`, `"country":"United States"`},
	{`"gender":"female"`, `"gender":"female","extension":[{"url":"http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex","valueCode":"F"}]`},
	{`"gender":"female"`, `"gender":"female","extension":[` + raceView(`{"url":"ombCategory","valueCoding":{"system":"urn:oid:2.16.840.1.113883.6.238","code":"2106-3"}},{"url":"detailed","valueCoding":{"system":"urn:oid:2.16.840.1.113883.6.238","code":"2108-9"}}`) + `]`},
}

// raceView is a race extension of a research view with parts (JSON
// objects, comma-separated).
func raceView(parts string) string {
	return `{"url":"http://hl7.org/fhir/us/core/StructureDefinition/us-core-race","extension":[` + parts + `]}`
}

// researchViewLeaks are edits of researchViewBase (old, new) and the
// problem safeHarborProblems must report for each.
var researchViewLeaks = []struct{ old, new, want string }{
	{`"gender":"female"`, `"gender":"female","name":[{"family":"Marsh"}]`, "type HumanName"},
	{`"gender":"female"`, `"gender":"female","telecom":[{"system":"phone","value":"555-0134"}]`, "type ContactPoint"},
	{`"status":"final"`, `"status":"final","identifier":[{"value":"MRN77441123"}]`, "type Identifier"},
	{`"status":"final"`, `"status":"final","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">x</div>"}`, "type Narrative"},
	{`"status":"final"`, `"status":"final","note":[{"text":"called Evelyn"}]`, "type Annotation"},
	{`"status":"final"`, `"status":"final","meta":{"source":"x"}`, "type Meta"},
	{`"gender":"female"`, `"gender":"female","photo":[{"contentType":"image/png"}]`, "type Attachment"},
	{`"code":"8867-4"}]`, `"code":"8867-4"}],"text":"Evelyn's pulse"`, "free text"},
	{`"code":"8867-4"}`, `"code":"8867-4","display":"Heart rate (E. Marsh)"}`, "free text"},
	{`"unit":"/min"`, `"unit":"per Dr Alvarez of Mercy Hospital"`, "a unit that does not read as one"},
	{`"unit":"/min"`, `"unit":"77441123"`, "a unit that does not read as one"},
	{`"state":"MA"`, `"state":"MA","city":"Boston"`, "an address element"},
	{`"postalCode":"021"`, `"postalCode":"02139"`, "no ZIP3"},
	{`"country":"US"`, `"country":"CA"`, "a ZIP3 outside the US"},
	{`"effectiveDateTime":"2019"`, `"effectiveDateTime":"2019-03-14"`, "finer than a year"},
	{`"birthDate":"1950"`, `"birthDate":"1930"`, "a year 90 or more years ago"},
	{`"status":"final"`, `"status":"final","issued":"2019-03-14T10:00:00Z"`, "type instant"},
	{`"reference":"Patient/ra1"`, `"reference":"Patient/spouse"`, "a reference other than"},
	{`"reference":"#c1"`, `"reference":"#c1","display":"Dr Alvarez"`, "a reference element other than"},
	{`"performer":[{"reference":"#c1"}]`, `"performer":[{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}],"display":"Dr Alvarez"}]`,
		"free text"},
	{`"_issued":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}]}`,
		`"_issued":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"},{"url":"http://x.example/by","valueString":"Dr Alvarez"}]}`,
		"a companion"},
	{`"id":"c1"`, `"id":"pat-evelyn"`, "an id that is not"},
	{`"status":"final"`, `"status":"final","id":"c1"`, "an id that is not"},
	{`"system":"http://loinc.org"`, `"system":"http://mercy.example/mrn"`, "no known terminology"},
	{`"system":"http://loinc.org"`, `"system":"http://hl7.org/fhir/sid/us-ssn"`, "no known terminology"},
	{`"gender":"female"`, `"gender":"female","extension":[{"url":"http://mercy.example/ext","valueCode":"x"}]`, "no known terminology"},
	{`"gender":"female"`, `"gender":"female","extension":[{"url":"http://hl7.org/fhir/us/core/StructureDefinition/us-core-race","valueCode":"x"}]`, "a race or ethnicity extension's valueCode"},
	{`"gender":"female"`, `"gender":"female","extension":[` + raceView(`{"url":"text","valueString":"White (per Evelyn Marsh)"}`) + `]`, "free text"},
	{`"gender":"female"`, `"gender":"female","extension":[` + raceView(`{"url":"text","valueString":"White (per Evelyn Marsh)"}`) + `]`, "a race or ethnicity part other than"},
	{`"gender":"female"`, `"gender":"female","extension":[` + raceView(`{"url":"detailed","valueCoding":{"system":"http://mercy.example/race","code":"2106-3"}}`) + `]`, "no known terminology"},
	{`"gender":"female"`, `"gender":"female","extension":[` + raceView(`{"url":"ombCategory","valueCoding":{"system":"urn:oid:2.16.840.1.113883.6.238","code":"2106-3","display":"Evelyn Marsh"}}`) + `]`, "free text"},
	{`"gender":"female"`, `"gender":"female","extension":[` + raceView(`{"url":"ombCategory","valueCoding":{"system":"urn:oid:2.16.840.1.113883.6.238","code":"2106-3"},"extension":[{"url":"http://x.example/by","valueString":"Evelyn Marsh"}]}`) + `]`, "a race or ethnicity part other than"},
	{`"gender":"female"`, `"gender":"female","extension":[{"url":"http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex","valueCode":"F","extension":[{"url":"ombCategory","valueCoding":{"system":"urn:oid:2.16.840.1.113883.6.238","code":"2106-3"}}]}]`, "no known terminology"},
	{`"country":"US"`, `"country":"United Kingdom"`, "a ZIP3 outside the US"},
	{`"_issued":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"masked"}]}`,
		`"_status":{"id":"Evelyn"}`, "a companion"},
	{`"status":"final"`, `"status":"final","patientName":"Marsh"`, "a member R4 does not define"},
	{`"contained":[`, `"contained":[{"resourceType":"Condition","id":"c2","subject":{"reference":"Patient/ra1"},"onsetAge":{"value":95,"unit":"a","system":"http://unitsofmeasure.org","code":"a"}},`,
		"an age over 89"},
	{`"code":"8867-4"}]},"subject":{"reference":"Patient/ra1"},"effectiveDateTime":"2019","valueQuantity":{"value":72,"unit":"/min","system":"http://unitsofmeasure.org","code":"/min"}`,
		`"code":"30525-0"}]},"subject":{"reference":"Patient/ra1"},"effectiveDateTime":"2019","valueQuantity":{"value":95,"unit":"a","system":"http://unitsofmeasure.org","code":"a"}`,
		"an age over 89"},
}

// TestViewCheckersFindEachProblem is the checkers' own test:
// researchViewBase has every Safe Harbor property and each edit of
// researchViewLeaks breaks one, which safeHarborProblems reports;
// leakedSourceValues finds a source's identifier, name, telecom and
// address values copied into a view as strings, words and digits; and
// billerProblems finds what the billing views drop.
func TestViewCheckersFindEachProblem(t *testing.T) {
	if ps := safeHarborProblems(decodeUseNumber(t, []byte(researchViewBase)), "ra1", 2026); len(ps) > 0 {
		t.Fatalf("the base view has problems: %v", ps)
	}
	for _, c := range researchViewAccepted {
		v := strings.Replace(researchViewBase, c.old, c.new, 1)
		if v == researchViewBase {
			t.Fatalf("%q is not in the base view", c.old)
		}
		if ps := safeHarborProblems(decodeUseNumber(t, []byte(v)), "ra1", 2026); len(ps) > 0 {
			t.Errorf("%s -> %s: problems %v, want none", c.old, c.new, ps)
		}
	}
	for _, c := range researchViewLeaks {
		if !strings.Contains(researchViewBase, c.old) {
			t.Fatalf("%q is not in the base view", c.old)
		}
		v := strings.Replace(researchViewBase, c.old, c.new, 1)
		ps := safeHarborProblems(decodeUseNumber(t, []byte(v)), "ra1", 2026)
		if !strings.Contains(strings.Join(ps, "\n"), c.want) {
			t.Errorf("%s -> %s: problems %v, want %q", c.old, c.new, ps, c.want)
		}
	}

	src := decodeUseNumber(t, []byte(`{"resourceType":"Patient","identifier":[{"value":"MRN-77441123"}],"name":[{"family":"Whittingham","given":["Evelyn"]}],`+
		`"telecom":[{"system":"phone","value":"(410) 555-0134"}],"address":[{"line":["14 Orchard Lane"],"city":"Chestertown","postalCode":"21620"}],`+
		`"contained":[{"resourceType":"RelatedPerson","id":"r","patient":{"reference":"Patient/p"},"name":[{"family":"Okafor"}]}]}`))
	for view, want := range map[string]string{
		`{"resourceType":"Patient","gender":"female"}`:                                         "",
		`{"resourceType":"Patient","language":"MRN-77441123"}`:                                 `the source's "MRN-77441123"`,
		`{"resourceType":"Patient","multipleBirthInteger":77441123}`:                           `digits of the source's "MRN-77441123"`,
		`{"resourceType":"Patient","language":"x-whittingham"}`:                                `"Whittingham"`,
		`{"resourceType":"Patient","maritalStatus":{"coding":[{"code":"4105550134"}]}}`:        `digits of the source's "(410) 555-0134"`,
		`{"resourceType":"Patient","maritalStatus":{"coding":[{"code":"ORCHARD"}]}}`:           `"Orchard"`,
		`{"resourceType":"Patient","maritalStatus":{"coding":[{"code":"Chestertown-21620"}]}}`: `"Chestertown"`,
		`{"resourceType":"Patient","maritalStatus":{"coding":[{"code":"okafor"}]}}`:            `"Okafor"`,
		`{"resourceType":"Patient","address":[{"postalCode":"216"}],"birthDate":"1962"}`:       "",
	} {
		got := strings.Join(leakedSourceValues(src, decodeUseNumber(t, []byte(view)), nil), "\n")
		if want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("leakedSourceValues(%s) = %q, want %q", view, got, want)
		}
	}

	const claim = `{"resourceType":"Claim","status":"active","use":"claim","created":"2014","patient":{"reference":"Patient/k"},` +
		`"provider":{"reference":"Organization/k"},"priority":{"coding":[{"code":"normal"}]},"type":{"coding":[{"code":"oral"}]},` +
		`"identifier":[{"value":"***2345"}],"insurance":[{"sequence":1,"focal":true,"coverage":{"reference":"Coverage/k"}}]}`
	if ps := billerProblems(decodeUseNumber(t, []byte(claim))); len(ps) > 0 {
		t.Fatalf("the biller's base view has problems: %v", ps)
	}
	for _, c := range []struct{ old, new, want string }{
		{`"value":"***2345"`, `"value":"12345"`, "unmasked"},
		{`"reference":"Patient/k"`, `"reference":"Patient/k","display":"Donald Duck"`, "a reference's display"},
		{`"reference":"Patient/k"`, `"reference":"Patient/k","identifier":{"value":"***1234"}`, "a reference's identifier"},
		{`{"code":"oral"}]`, `{"code":"oral"}],"text":"oral (Donald)"`, "a code's text"},
		{`"code":"oral"`, `"code":"oral","display":"Donald"`, "a code's display"},
		{`"status":"active"`, `"status":"active","extension":[{"url":"http://x.example/e","valueString":"Donald"}]`, "an extension"},
		{`"status":"active"`, `"status":"active","contained":[{"resourceType":"Patient","id":"p"}]`, "the billing views drop"},
		{`"status":"active"`, `"status":"active","accident":{"locationAddress":{"city":"Vancouver"}}`, "type Address"},
		{`"status":"active"`, `"status":"active","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">x</div>"}`, "type Narrative"},
	} {
		ps := billerProblems(decodeUseNumber(t, []byte(strings.Replace(claim, c.old, c.new, 1))))
		if !strings.Contains(strings.Join(ps, "\n"), c.want) {
			t.Errorf("%s -> %s: problems %v, want %q", c.old, c.new, ps, c.want)
		}
	}
}
