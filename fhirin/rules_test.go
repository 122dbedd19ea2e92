package fhirin

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// BodyLabels, which 'custos store relabel' applies to stored bodies,
// derives from a resource's body what Read gives it from the same body
// (Read is the reference it must agree with): meta.security under its
// systems, DocumentReference.securityLabel, Composition.confidentiality,
// a patient's home Location alone or contained, and nothing for a ward. A
// body it cannot read is an error that quotes none of it.
func TestBodyLabelsAgreesWithRead(t *testing.T) {
	dir := t.TempDir()
	cases := map[string][]string{
		"Location": {
			`{"resourceType":"Location","id":"ptres","name":"Marsh residence","type":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v3-RoleCode","code":"PTRES"}]}],"address":{"line":["14 Orchard Lane"]}}`,
			`{"resourceType":"Location","id":"house","physicalType":{"coding":[{"code":"ho"}]},"meta":{"security":[{"system":"2.16.840.1.113883.5.25","code":"R"}]}}`,
			`{"resourceType":"Location","id":"ward","name":"Ward 3","address":{"use":"work","line":["1 Hospital Rd"]}}`,
		},
		"HealthcareService": {`{"resourceType":"HealthcareService","id":"visits","contained":[{"resourceType":"Location","id":"h","address":{"use":"home"}}],"location":[{"reference":"#h"}]}`},
		"Observation":       {`{"resourceType":"Observation","id":"o","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/p"},"meta":{"security":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"ETHUD"},{"code":"PSY"}]}}`},
		"Composition":       {`{"resourceType":"Composition","id":"c","status":"final","type":{"text":"x"},"subject":{"reference":"Patient/p"},"date":"2020-01-01","author":[{"display":"a"}],"title":"t","confidentiality":"V"}`},
		"DocumentReference": {`{"resourceType":"DocumentReference","id":"d","status":"current","subject":{"reference":"Patient/p"},"securityLabel":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"HIV"}]}],"content":[{"attachment":{"url":"http://example.org/x"}}]}`},
		"Patient":           {`{"resourceType":"Patient","id":"p","meta":{"security":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"CEL"}]}}`},
	}
	for typ, lines := range cases {
		if err := os.WriteFile(filepath.Join(dir, typ+".ndjson"), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	items := mustReadAll(t, dir)
	labelled := 0
	for typ, lines := range cases {
		for _, line := range lines {
			var id struct{ ID string }
			if err := json.Unmarshal([]byte(line), &id); err != nil {
				t.Fatal(err)
			}
			it := find(t, items, typ, id.ID)
			got, err := BodyLabels(it.Body)
			if err != nil || !slices.Equal(got, it.Sensitivity) {
				t.Errorf("%s/%s: BodyLabels = %v %v, Read gave %v", typ, id.ID, got, err, it.Sensitivity)
			}
			if len(got) > 0 {
				labelled++
			}
		}
	}
	if labelled != 7 {
		t.Errorf("%d resources labelled, want every one but the ward", labelled)
	}

	for body, want := range map[string]error{
		`not json`:                           ErrJSON,
		`[1]`:                                ErrJSON,
		`{"resourceType":"Widget","id":"w"}`: ErrResourceType,
		`{"resourceType":"Location","id":"l","meta":{"security":"Marsh"}}`:              ErrJSON,
		`{"resourceType":"Location","id":"l","address":{"use":1,"line":["Marsh"]}}`:     ErrJSON,
		`{"resourceType":"HealthcareService","id":"h","contained":["Marsh"]}`:           ErrJSON,
		`{"resourceType":"Location","id":"l","type":[{"coding":[{"code":["Marsh"]}]}]}`: ErrJSON,
	} {
		_, err := BodyLabels([]byte(body))
		if !errors.Is(err, want) || strings.Contains(err.Error(), "Marsh") {
			t.Errorf("BodyLabels(%s) = %v, want %v quoting nothing", body, err, want)
		}
	}
}

// labelRulesTables are the tables of the rules that derive labels from a
// resource itself, by name.
func labelRulesTables() map[string]any {
	return map[string]any{
		"confidentialitySystems": confidentialitySystems, "actCodeSystems": actCodeSystems, "usPrivacyLawSystems": usPrivacyLawSystems,
		"confidentialityLabels": confidentialityLabels, "actCodeLabels": actCodeLabels, "usPrivacyLawLabels": usPrivacyLawLabels, "customLabels": customLabels,
		"roleCodeSystems": roleCodeSystems, "physicalTypeSystems": physicalTypeSystems, "residenceRoleCodes": residenceRoleCodes,
		"LabelSystem": LabelSystem, "ResidenceLabel": ResidenceLabel,
	}
}

// labelRulesFingerprints pins, per LabelRules version, the SHA-256 of the
// rules' tables (encoding/json sorts map keys).
var labelRulesFingerprints = map[int]string{
	1: "72614894906a463186bd1fae0205d9249788c9b7c9e1a45cf98694ddc9ef0910",
}

// A change to a table of the label rules must come with a new LabelRules
// (catalogs labelled with the old tables are then refused until
// relabelled): the tables are pinned per version. A change of the code
// that reads them (ownLabels, residenceLocation) must bump it too, which
// no table shows.
func TestLabelRulesVersionPinsTheTables(t *testing.T) {
	b, err := json.Marshal(labelRulesTables())
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%x", sha256.Sum256(b))
	if want := labelRulesFingerprints[LabelRules]; got != want {
		t.Fatalf("the label rules' tables are %s, version %d pins %q: a rule changed; bump LabelRules (rules.go) and pin the new tables under it", got, LabelRules, want)
	}
}
