package fhirin

import "slices"

// ResidenceLabel is the custos sensitivity label of a resource that is, or
// contains, a Location that is a patient's home (residenceLocation). A
// Location is tenant-level by R4's Patient CompartmentDefinition, which
// leaves it out, so without this label a patient's home was served as
// reference data, address and all, to every biller and clinician of the
// tenant: the default policy never treats a resource carrying it as
// reference data (docs/policy.md, "Tenant-level reference data";
// docs/import.md, "A patient's home").
const ResidenceLabel = "residence"

// Code systems of the codes that say a Location is a home, by every URI
// they are written with (as for the label code systems, labels.go).
var (
	roleCodeSystems = []string{"http://terminology.hl7.org/CodeSystem/v3-RoleCode", "https://terminology.hl7.org/CodeSystem/v3-RoleCode",
		"http://hl7.org/fhir/v3/RoleCode", "urn:oid:2.16.840.1.113883.5.111"}
	physicalTypeSystems = []string{"http://terminology.hl7.org/CodeSystem/location-physical-type", "https://terminology.hl7.org/CodeSystem/location-physical-type",
		"http://hl7.org/fhir/location-physical-type"}
	// residenceRoleCodes are R4 v3-RoleCode's service delivery location
	// roles that are a patient's home: PTRES (Patient's Residence,
	// "location where healthcare was delivered which is the residence of
	// the Patient") and DADDR (Delivery Address, "location address where
	// medical supplies were transported to for use": home medical
	// equipment goes to the patient's home). TestResidenceCodesAreHL7
	// checks them against the R4 code system.
	residenceRoleCodes = []string{"PTRES", "DADDR"}
)

// residenceLocation reports whether m, a Location at FHIR path path, is a
// patient's home: a type of residenceRoleCodes (v3-RoleCode, the binding
// R4 gives Location.type), a physicalType ho (location-physical-type
// "House": "a residential dwelling. Usually used to reference a location
// that a person/patient may reside"), or an address or a telecom of use
// home (R4 AddressUse and ContactPointUse "home": a person's). A code
// written without its system counts (as a security label's does: it must
// not be lost by being overlooked); an element of the wrong JSON type is
// an ErrJSON.
func (r *resource) residenceLocation(m map[string]any, path string) (bool, error) {
	var cs []coding
	if v, ok := m["type"]; ok {
		arr, ok := v.([]any)
		if !ok {
			return false, r.errf(path+".type", ErrJSON, "not an array")
		}
		for i, cc := range arr {
			if err := r.conceptCodings(cc, path+".type["+itoa(i)+"]", &cs); err != nil {
				return false, err
			}
		}
	}
	for _, c := range cs {
		if (c.System == "" || slices.Contains(roleCodeSystems, c.System)) && slices.Contains(residenceRoleCodes, c.Code) {
			return true, nil
		}
	}
	cs = cs[:0]
	if v, ok := m["physicalType"]; ok {
		if err := r.conceptCodings(v, path+".physicalType", &cs); err != nil {
			return false, err
		}
	}
	for _, c := range cs {
		if (c.System == "" || slices.Contains(physicalTypeSystems, c.System)) && c.Code == "ho" {
			return true, nil
		}
	}
	for _, el := range []string{"address", "telecom"} {
		home, err := r.useHome(m[el], path+"."+el)
		if err != nil || home {
			return home, err
		}
	}
	return false, nil
}

// conceptCodings appends the Codings of v, a CodeableConcept at path.
func (r *resource) conceptCodings(v any, path string, cs *[]coding) error {
	o, ok := v.(map[string]any)
	if !ok {
		return r.errf(path, ErrJSON, "not a CodeableConcept")
	}
	return r.codings(o["coding"], path+".coding", cs)
}

// useHome reports whether v, an Address or ContactPoint or an array of
// them at path (nil: absent), has one of use home.
func (r *resource) useHome(v any, path string) (bool, error) {
	if v == nil {
		return false, nil
	}
	arr, isArr := v.([]any)
	if !isArr {
		arr = []any{v}
	}
	for i, e := range arr {
		p := path
		if isArr {
			p += "[" + itoa(i) + "]"
		}
		o, ok := e.(map[string]any)
		use, okUse := o["use"].(string)
		if !ok || (!okUse && o["use"] != nil) {
			return false, r.errf(p, ErrJSON, "not an object with a code use")
		}
		if use == "home" {
			return true, nil
		}
	}
	return false, nil
}
