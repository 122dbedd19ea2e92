package synth

import (
	"encoding/json"
	"fmt"
	"path/filepath"
)

// DemoClientID is the client_id of every example principal.
const DemoClientID = "demo-assistant"

// OutsiderTenant is the tenant of principals/outsider.json; when the data
// set's own tenant has that name, "other-hospital" is used instead.
const OutsiderTenant = "other-clinic"

// Principal is the JSON shape of a file in principals/.
type Principal struct {
	Sub          string   `json:"sub"`
	Roles        []string `json:"roles"`
	ClientID     string   `json:"client_id"`
	Tenant       string   `json:"tenant"`
	Patients     []string `json:"patients"`
	PurposeOfUse string   `json:"purpose_of_use"`
}

// careTeamSize is how many leading patients the clinicians have a care
// relationship with: the first half (rounded up), and never fewer than the
// edge-case patients, so every edge case is reachable by a treating
// clinician and the policy alone decides (for example, the opt-out patient).
func careTeamSize(patients int) int {
	return max((patients+1)/2, min(patients, len(EdgeCases)))
}

// principals returns the example principals keyed by file name.
func (g *generator) principals(careTeam []string) []struct {
	file string
	p    Principal
} {
	t := g.opts.Tenant
	other := OutsiderTenant
	if other == t {
		other = "other-hospital"
	}
	none := []string{}
	return []struct {
		file string
		p    Principal
	}{
		{"clinician.json", Principal{"demo-clinician", []string{"clinician"}, DemoClientID, t, careTeam, "TREAT"}},
		{"clinician-hiv.json", Principal{"demo-clinician-hiv", []string{"clinician", "sensitive:hiv"}, DemoClientID, t, careTeam, "TREAT"}},
		{"billing.json", Principal{"demo-billing", []string{"billing"}, DemoClientID, t, none, "HPAYMT"}},
		{"researcher.json", Principal{"demo-researcher", []string{"researcher"}, DemoClientID, t, none, "HRESCH"}},
		{"auditor.json", Principal{"demo-auditor", []string{"auditor"}, DemoClientID, t, none, "HOPERAT"}},
		{"outsider.json", Principal{"demo-outsider", []string{"clinician"}, DemoClientID, other, none, "TREAT"}},
	}
}

func (g *generator) writePrincipals(careTeam []string) (int64, error) {
	var total int64
	for _, e := range g.principals(careTeam) {
		b, err := json.MarshalIndent(e.p, "", "  ")
		if err != nil {
			return total, fmt.Errorf("synth: encode principal: %w", err)
		}
		b = append(b, '\n')
		if err := writeNew(filepath.Join(g.dir, PrincipalsDir, e.file), b); err != nil {
			return total, err
		}
		total += int64(len(b))
	}
	return total, nil
}
