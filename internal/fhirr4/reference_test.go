package fhirr4

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/e2e/validators"
	"github.com/custos-mcp/custos/internal/repofiles"
	"github.com/custos-mcp/custos/store/synth"
)

// fixture is one FHIR resource (or Bundle) found in a file of the
// repository or of the synthetic data set.
type fixture struct {
	where string
	raw   []byte
	m     map[string]any
}

// fixtures returns every JSON value with a string resourceType in the
// .json, .ndjson and their .gz files of paths, each named by its path
// relative to root.
func fixtures(t *testing.T, root string, paths []string) []fixture {
	t.Helper()
	var out []fixture
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".gz")
		if !strings.HasSuffix(name, ".json") && !strings.HasSuffix(name, ".ndjson") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if name != filepath.Base(p) {
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				continue // a fixture of bad gzip
			}
			if b, err = io.ReadAll(zr); err != nil {
				continue
			}
		}
		var vals [][]byte
		if strings.HasSuffix(name, ".ndjson") {
			sc := bufio.NewScanner(bytes.NewReader(b))
			sc.Buffer(nil, 1<<26)
			for sc.Scan() {
				vals = append(vals, bytes.Clone(sc.Bytes()))
			}
		} else {
			vals = [][]byte{b}
		}
		for i, v := range vals {
			dec := json.NewDecoder(bytes.NewReader(v))
			dec.UseNumber()
			var m map[string]any
			if dec.Decode(&m) != nil || m == nil {
				continue // not one JSON object: no resource
			}
			if _, ok := m["resourceType"].(string); !ok {
				continue
			}
			var c bytes.Buffer
			if json.Compact(&c, v) != nil {
				continue
			}
			rel, _ := filepath.Rel(root, p)
			out = append(out, fixture{where: rel + ":" + strconv.Itoa(i+1), raw: c.Bytes(), m: m})
		}
	}
	return out
}

// generatedFiles returns the regular files under dir, a directory the
// test wrote itself.
func generatedFiles(t *testing.T, dir string) []string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

// TestCheckAgreesWithReference runs every FHIR fixture of the repository
// (the files git tracks: repofiles; an installed package is no fixture)
// and a synthetic data set (store/synth, as the demo seeds it) through
// Check and through the reference validators (e2e/validators: Medplum's
// R4 validator and HL7's R4 JSON schema), and requires the same verdict.
//
// Check is looser on purpose where the reference checks more than the
// structure (docs/import.md, "Structure"): terminology bindings,
// invariants (FHIRPath constraints) and the Bundle envelope's own rules.
// A fixture the reference refuses for those alone is listed in
// referenceOnly with the reason; one Check refuses and the reference
// takes fails the test: that is valid outside data custos would refuse.
func TestCheckAgreesWithReference(t *testing.T) {
	all := fixtures(t, "../..", repofiles.Tracked(t, "../.."))
	synthDir := filepath.Join(t.TempDir(), "synthetic")
	if _, err := synth.Generate(t.Context(), synthDir, synth.Options{Patients: 12, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	all = append(all, fixtures(t, synthDir, generatedFiles(t, synthDir))...)
	// The table tests' cases: the valid ones must be valid for the
	// reference too, and the invalid ones invalid.
	for i, s := range validCases {
		all = append(all, fixture{where: "validCases[" + strconv.Itoa(i) + "]", raw: []byte(s), m: decode(t, s)})
	}
	for _, tc := range slices.Concat(unknownCases, kindCases, formatCases, requiredCases, narrativeCases) {
		if tc.path == "resourceType" {
			continue // the validators refuse to read it at all
		}
		all = append(all, fixture{where: tc.name, raw: []byte(tc.body), m: decode(t, tc.body)})
	}
	raws := make([][]byte, len(all))
	for i, f := range all {
		raws[i] = f.raw
	}
	// In batches, each report of a bounded size (until h-outside3 node cut
	// a report longer than a pipe's buffer short; validators
	// TestFHIRReportsInFullOnAPipe).
	const batch = 100
	refInvalid := map[int]string{}
	for lo := 0; lo < len(raws); lo += batch {
		for _, inv := range validators.FHIR(t, raws[lo:min(lo+batch, len(raws))]).Invalid {
			if i := lo + inv.Index; refInvalid[i] == "" {
				refInvalid[i] = inv.Validator + ": " + inv.Message
			}
		}
	}
	var both, neither, onlyRef, onlyCheck int
	for i, f := range all {
		ps := Check(f.m)
		ref, bad := refInvalid[i]
		switch {
		case len(ps) > 0 && !bad:
			if why := checkOnly(ps); why != "" {
				onlyCheck++
				t.Logf("%s: only Check refuses (%s): %v", f.where, why, ps)
			} else {
				t.Errorf("%s: Check refuses what the reference takes: %v", f.where, ps)
			}
		case len(ps) == 0 && bad:
			onlyRef++
			if why := referenceOnly(ref); why != "" {
				t.Logf("%s: only the reference refuses (%s): %s", f.where, why, ref)
			} else {
				t.Errorf("%s: only the reference refuses: %s", f.where, ref)
			}
		case len(ps) > 0:
			both++
		default:
			neither++
		}
	}
	t.Logf("%d fixtures: %d valid for both, %d invalid for both, %d invalid for the reference alone, %d for Check alone", len(all), neither, both, onlyRef, onlyCheck)
}

// referenceOnly says why Check deliberately takes what the reference
// refuses with message ref, or "" when it has no reason to.
func referenceOnly(ref string) string {
	switch {
	case strings.HasPrefix(ref, "hl7-fhir-r4-json-schema: ") && nullInArray.MatchString(ref):
		// R4 json.html: a repeating primitive's array holds null where
		// its _name companion holds the value's extension; the schema
		// does not model it (Medplum's validator takes it).
		return "HL7's schema takes no null in a primitive array"
	case strings.HasPrefix(ref, "hl7-fhir-r4-json-schema: ") && strings.HasSuffix(ref, ` should match pattern "^[ \r\n\t\S]+$"`):
		// The string and markdown pattern run as a JavaScript regexp,
		// whose \S leaves out Unicode's spaces (U+00A0, U+2028,
		// U+3000, ...): valid R4 characters (Java's and RE2's \S take
		// them; Medplum's validator does). Control characters, which
		// R4 refuses, are Check's and Medplum's to refuse.
		return "HL7's schema's string pattern, run as a JavaScript regexp, refuses Unicode spaces"
	case strings.HasPrefix(ref, "hl7-fhir-r4-json-schema: ") && fhirVersion.MatchString(ref):
		// The packaged schema is R4 4.0.0's: its FHIRVersion codes stop
		// at 4.0.0, and 4.0.1 is R4 (a terminology binding: not checked).
		return "HL7's packaged schema is R4 4.0.0's and knows no fhirVersion 4.0.1"
	}
	return ""
}

var nullInArray = regexp.MustCompile(`\[[0-9]+\] should be string$`)

// fhirVersion is HL7's schema's refusal of a fhirVersion, one (a
// CapabilityStatement's, a StructureDefinition's) or one of many (an
// ImplementationGuide's).
var fhirVersion = regexp.MustCompile(`\.fhirVersion(\[[0-9]+\])? should be equal to one of the allowed values$`)

// checkOnly says why Check refuses, with problems ps, what both reference
// validators take, or "" when it has no reason to: R4 rules of its JSON
// form (json.html) that neither validator checks: one type of a choice
// element, no empty object or array, a _name array aligned with its
// values; and R4's rules of narrative (narrative.html, txt-1, txt-2),
// which neither checks either: Medplum's FHIRPath htmlChecks() is true
// whatever the XHTML and its xhtml format /.*/, and HL7's schema gives
// xhtml no type and no pattern. A narrative with <script> is valid to
// both (TestCheckNarrative's cases).
func checkOnly(ps []Problem) string {
	why := ""
	for _, p := range ps {
		switch {
		case strings.HasPrefix(p.What, "a second type of the choice element"),
			strings.HasPrefix(p.What, "an empty object"), strings.HasPrefix(p.What, "an empty array"),
			strings.HasPrefix(p.What, "not as long as the array of values"):
			why = "an R4 json.html rule the validators do not check"
		case strings.HasPrefix(p.What, "not R4 narrative: "):
			why = "an R4 narrative rule (narrative.html, txt-1, txt-2) the validators do not check"
		default:
			return ""
		}
	}
	return why
}
