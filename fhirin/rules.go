package fhirin

import (
	"bytes"
	"encoding/json"
)

// LabelRules is the version of the rules by which Read derives an item's
// sensitivity labels from the resource itself: the code tables of
// labels.go, the elements ownLabels reads, residenceLocation. Bump it with
// every change to one of them: a catalog records the version its labels
// were derived with (store, meta "label-rules"), and custos serve refuses a
// catalog labelled with older rules until 'custos store relabel' (which
// applies BodyLabels to every stored body) or a full import brings it up to
// date (docs/operations.md, "Upgrade"). TestLabelRulesVersionPinsTheTables
// pins the rules' tables per version.
//
// Versions:
//
//	(none)  before 2026-12-07: no residence rule; a catalog without the
//	        version recorded was labelled so
//	1       a Location that is a patient's home is labelled residence
//	        (residence.go)
const LabelRules = 1

// BodyLabels returns the sensitivity labels the current rules (LabelRules)
// derive from body, the FHIR JSON of one resource as the catalog stores it:
// those of its meta.security, DocumentReference.securityLabel,
// Composition.confidentiality and residence (its contained resources'
// too), as Read gives them to the resource. It does not see what Read
// adds from outside the body (a Bundle's labels, a Binary component's, a
// patient-wide label), which the catalog keeps. An error names what is
// malformed (never its content). Pure: no I/O.
func BodyLabels(body []byte) ([]string, error) {
	const where = "stored resource"
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, jsonErr(where, body, err)
	}
	if m == nil {
		return nil, newError(where, "", ErrJSON, "not a JSON object")
	}
	typ, _ := m["resourceType"].(string)
	if !r4Types[typ] {
		return nil, newError(where, "resourceType", ErrResourceType, "not an R4 resource type")
	}
	if c, ok := m["contained"]; ok {
		arr, ok := c.([]any)
		if !ok {
			return nil, newError(where, typ+".contained", ErrJSON, "not an array")
		}
		for i, v := range arr {
			if _, ok := v.(map[string]any); !ok {
				return nil, newError(where, typ+".contained["+itoa(i)+"]", ErrJSON, "not a resource object")
			}
		}
	}
	r := &resource{where: where, typ: typ, m: m, raw: body}
	return r.labels(nil)
}
