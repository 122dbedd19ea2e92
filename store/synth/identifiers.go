package synth

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Identifiers returns every direct identifier of every patient in a data
// set written by Generate: family, given and full names, identifier values
// (MRN, SSN), phone numbers and e-mail addresses, address lines, cities and
// ZIP codes, and birth dates. It reads them back from the Patient files
// under dir/fhir, so it reports what was actually written.
//
// It exists for leak scans: tests and tools that must show no patient
// identifier reached a log, an error, an audit record or a minimized
// payload search their output for these strings. The result is sorted and
// deduplicated; strings shorter than 3 characters are left out (they match
// anything).
func Identifiers(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "fhir", "*.json"))
	if err != nil {
		return nil, err
	}
	var out []string
	patients := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var rt struct {
			ResourceType string `json:"resourceType"`
		}
		if err := json.Unmarshal(raw, &rt); err != nil {
			return nil, fmt.Errorf("synth: %s: %w", filepath.Base(f), err)
		}
		if rt.ResourceType != "Patient" {
			continue // an Organization's name is a string, and no patient's
		}
		var p struct {
			Name []struct {
				Family string   `json:"family"`
				Given  []string `json:"given"`
			} `json:"name"`
			Identifier []struct{ Value string } `json:"identifier"`
			Telecom    []struct{ Value string } `json:"telecom"`
			BirthDate  string                   `json:"birthDate"`
			Address    []struct {
				Line       []string `json:"line"`
				City       string   `json:"city"`
				PostalCode string   `json:"postalCode"`
			} `json:"address"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf("synth: %s: %w", filepath.Base(f), err)
		}
		patients++
		for _, n := range p.Name {
			out = append(out, n.Family, strings.TrimSpace(strings.Join(n.Given, " ")+" "+n.Family))
			out = append(out, n.Given...)
		}
		for _, v := range p.Identifier {
			out = append(out, v.Value)
		}
		for _, v := range p.Telecom {
			out = append(out, v.Value)
		}
		for _, a := range p.Address {
			out = append(out, a.City, a.PostalCode)
			out = append(out, a.Line...)
		}
		out = append(out, p.BirthDate)
	}
	if patients == 0 {
		return nil, fmt.Errorf("synth: no Patient resources under %s", filepath.Join(dir, "fhir"))
	}
	out = slices.DeleteFunc(out, func(s string) bool { return len(s) < 3 })
	slices.Sort(out)
	return slices.Compact(out), nil
}
