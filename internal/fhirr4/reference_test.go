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
	refInvalid := map[int][]validators.Invalid{} // every refusal of a file, each judged
	for lo := 0; lo < len(raws); lo += batch {
		for _, inv := range validators.FHIR(t, raws[lo:min(lo+batch, len(raws))]).Invalid {
			refInvalid[lo+inv.Index] = append(refInvalid[lo+inv.Index], inv)
		}
	}
	var both, neither, onlyRef, onlyCheck int
	for i, f := range all {
		ps := Check(f.m)
		refs, bad := refInvalid[i]
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
			if ref, ok := unexplained(refs); ok {
				t.Errorf("%s: only the reference refuses: %s: %s", f.where, ref.Validator, ref.Message)
			} else {
				t.Logf("%s: only the reference refuses (%s): %s: %s", f.where, referenceOnly(refs[0]), refs[0].Validator, refs[0].Message)
			}
		case len(ps) > 0:
			both++
		default:
			neither++
		}
	}
	t.Logf("%d fixtures: %d valid for both, %d invalid for both, %d invalid for the reference alone, %d for Check alone", len(all), neither, both, onlyRef, onlyCheck)
}

// unexplained returns the first of a file's refusals by the reference
// validators, refs, that referenceOnly has no reason for: a file Check
// takes is excused only when every refusal of it is. Until h-review64 the
// first refusal reported was judged alone, so a known defect of HL7's
// schema reported first excused the file whatever else the two
// validators refused in it (Medplum's refusal of the same file among
// them: TestUnexplainedJudgesEveryRefusal).
func unexplained(refs []validators.Invalid) (validators.Invalid, bool) {
	for _, r := range refs {
		if referenceOnly(r) == "" {
			return r, true
		}
	}
	return validators.Invalid{}, false
}

// referenceOnly says why Check deliberately takes what the reference
// refuses with inv, or "" when it has no reason to: a known defect of
// HL7's R4 JSON schema its message tells (e2e/validators SchemaDefects).
func referenceOnly(inv validators.Invalid) string {
	if d := validators.KnownSchemaDefect(inv); d != nil {
		return d.Why
	}
	return ""
}

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

// TestUnexplainedJudgesEveryRefusal: a file's refusals are excused only
// all together; one refusal no known schema defect explains is reported,
// wherever it comes in the validators' report.
func TestUnexplainedJudgesEveryRefusal(t *testing.T) {
	defect := validators.Invalid{Validator: validators.HL7Schema, Message: ".name[0].given[1] should be string",
		Resource: `{"resourceType":"Patient","name":[{"given":["A",null],"_given":[null,{"id":"g"}]}]}`} // the schema's defect: R4 JSON's null with its companion
	real := validators.Invalid{Validator: validators.Medplum, Message: "Invalid JSON type: expected string, but got number (Patient.name.given)"}
	if referenceOnly(defect) == "" || referenceOnly(real) != "" {
		t.Fatalf("the cases do not mean what they say: %q, %q", referenceOnly(defect), referenceOnly(real))
	}
	for _, c := range []struct {
		refs []validators.Invalid
		want *validators.Invalid
	}{
		{[]validators.Invalid{defect}, nil},
		{[]validators.Invalid{defect, defect}, nil},
		{[]validators.Invalid{real}, &real},
		{[]validators.Invalid{defect, real}, &real},
		{[]validators.Invalid{real, defect}, &real},
	} {
		got, ok := unexplained(c.refs)
		switch {
		case c.want == nil && ok:
			t.Errorf("%v: %v reported, want every refusal excused", c.refs, got)
		case c.want != nil && (!ok || got != *c.want):
			t.Errorf("%v: %v, %v; want %v reported", c.refs, got, ok, *c.want)
		}
	}
}
