package minimize_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/internal/fhirr4"
)

// US Core's race and ethnicity extensions and CDC's Race & Ethnicity code
// system, as the inputs below write them.
const (
	raceURL      = "http://hl7.org/fhir/us/core/StructureDefinition/us-core-race"
	ethnicityURL = "http://hl7.org/fhir/us/core/StructureDefinition/us-core-ethnicity"
	cdcRace      = "urn:oid:2.16.840.1.113883.6.238"
)

// raceCoding is a sub-extension of url part whose valueCoding is code of
// system sys, with display.
func raceCoding(part, sys, code, display string) string {
	return `{"url":"` + part + `","valueCoding":{"system":"` + sys + `","code":"` + code + `","display":"` + display + `"}}`
}

// usCorePatient is the shape of HL7's US Core Patient example
// (Patient-example.json, Amy V. Shaw): race of three OMB categories and
// two detailed codes, ethnicity of one and two, each with its text, and
// birth sex.
var usCorePatient = `{"resourceType":"Patient","id":"example","meta":{"profile":["http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient"]},"extension":[` +
	`{"url":"` + raceURL + `","extension":[` + raceCoding("ombCategory", cdcRace, "2106-3", "White") + `,` +
	raceCoding("ombCategory", cdcRace, "1002-5", "American Indian or Alaska Native") + `,` + raceCoding("ombCategory", cdcRace, "2028-9", "Asian") + `,` +
	raceCoding("detailed", cdcRace, "1586-7", "Shoshone") + `,` + raceCoding("detailed", cdcRace, "2036-2", "Filipino") + `,{"url":"text","valueString":"Mixed"}]},` +
	`{"url":"` + ethnicityURL + `","extension":[` + raceCoding("ombCategory", cdcRace, "2135-2", "Hispanic or Latino") + `,` +
	raceCoding("detailed", cdcRace, "2184-0", "Dominican") + `,` + raceCoding("detailed", cdcRace, "2148-5", "Mexican") + `,{"url":"text","valueString":"Hispanic or Latino"}]},` +
	`{"url":"http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex","valueCode":"F"}],` +
	`"identifier":[{"system":"http://hospital.smarthealthit.org","value":"1032702"}],"name":[{"family":"Shaw","given":["Amy","V."]}],"gender":"female","birthDate":"2007-02-20"}`

// raceLeaks is a Patient whose race and ethnicity extensions carry what a
// research view must not release beside one OMB category: a text with a
// name, a detailed code of a local system, an SSN and an MRN as CDC codes,
// a category as a string and as a bare code, a coding under a sub-extension
// of another url, an extension and an id on a kept sub-extension, a value
// on the extension itself; and an ethnicity of its text alone.
var raceLeaks = `{"resourceType":"Patient","gender":"female","extension":[{"url":"` + raceURL + `","valueString":"Evelyn Marsh","extension":[` +
	`{"id":"MRN77441123","url":"ombCategory","valueCoding":{"system":"` + cdcRace + `","code":"2054-5","display":"Evelyn Marsh"},"extension":[{"url":"http://x.example/by","valueString":"Evelyn Marsh"}]},` +
	`{"url":"text","valueString":"Evelyn Marsh, per her daughter"},` +
	raceCoding("detailed", "http://acme.example/race", "2106-3", "White") + `,` +
	raceCoding("detailed", cdcRace, "219-09-9999", "White") + `,` +
	raceCoding("detailed", cdcRace, "77441123", "White") + `,` +
	`{"url":"ombCategory","valueString":"White (Evelyn Marsh)"},{"url":"ombCategory","valueCode":"2106-3"},` +
	raceCoding("http://x.example/mmn", cdcRace, "2106-3", "Marsh") + `,` +
	`{"url":"detailed","extension":[` + raceCoding("detailed", cdcRace, "2108-9", "Marsh") + `]}]},` +
	`{"url":"` + ethnicityURL + `","extension":[{"url":"text","valueString":"Evelyn Marsh"}]}]}`

// TestDeidentifyKeepsRaceAndEthnicityCodes: a research view keeps US
// Core's race and ethnicity as their OMB categories and detailed codes of
// CDC's Race & Ethnicity code set, system and code, and nothing else of
// them: no text, no display, no local code, no identifier as a code, no
// string, no nested extension; an extension left with no code is dropped
// whole. Until h-race both extensions were dropped whole, a researcher
// losing race and ethnicity, which are none of Safe Harbor's identifiers.
// The output is valid R4: fhirr4.Check, and ext-1 (an extension has a
// value or extensions, not both), which the invariants script leaves to
// the validators.
func TestDeidentifyKeepsRaceAndEthnicityCodes(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string // url|part|code of every kept coding, in order
	}{
		{"US Core's example", usCorePatient, []string{
			raceURL + "|ombCategory|2106-3", raceURL + "|ombCategory|1002-5", raceURL + "|ombCategory|2028-9",
			raceURL + "|detailed|1586-7", raceURL + "|detailed|2036-2",
			ethnicityURL + "|ombCategory|2135-2", ethnicityURL + "|detailed|2184-0", ethnicityURL + "|detailed|2148-5"}},
		{"leaks", raceLeaks, []string{raceURL + "|ombCategory|2054-5"}},
	} {
		out := deidentify(t, []byte(tc.in), testAlias)
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.UseNumber() // as fhirr4.Check wants
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		if ps := fhirr4.Check(m); len(ps) > 0 {
			t.Errorf("%s: the output is not valid R4: %v\n%s", tc.name, ps, out)
		}
		var got []string
		exts, _ := m["extension"].([]any)
		for _, x := range exts {
			ext := x.(map[string]any)
			extOne(t, tc.name, ext)
			u := ext["url"].(string)
			if u != raceURL && u != ethnicityURL {
				continue
			}
			for _, y := range ext["extension"].([]any) {
				sub := y.(map[string]any)
				c := sub["valueCoding"].(map[string]any)
				if len(sub) != 2 || len(c) != 2 || c["system"] != cdcRace {
					t.Errorf("%s: a sub-extension other than url and a coding of system and code: %v", tc.name, sub)
				}
				got = append(got, u+"|"+sub["url"].(string)+"|"+c["code"].(string))
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: kept %q, want %q\n%s", tc.name, got, tc.want, out)
		}
		for _, leak := range []string{"Marsh", "Mixed", "Shoshone", "Latino", `"text"`, "valueString", "acme", "9999", "77441123", "2108-9", "x.example"} {
			if strings.Contains(string(out), leak) {
				t.Errorf("%s: the output holds %s\n%s", tc.name, leak, out)
			}
		}
	}
}

// extOne fails t unless extension ext and those inside it keep R4's
// ext-1: extensions or a value, not both, and not neither.
func extOne(t *testing.T, name string, ext map[string]any) {
	t.Helper()
	values := 0
	for k := range ext {
		if strings.HasPrefix(k, "value") {
			values++
		}
	}
	subs, _ := ext["extension"].([]any)
	if values+min(len(subs), 1) != 1 {
		t.Errorf("%s: an extension breaks ext-1 (a value or extensions): %v", name, ext)
	}
	for _, x := range subs {
		extOne(t, name, x.(map[string]any))
	}
}
