package bundle

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The IHE BALP profiles as data, transcribed from the IG's own FSH
// (github.com/IHE/ITI.BasicAudit, input/fsh/PatientRead.fsh and
// PatientQuery.fsh, the versions with the 0..0 rules on every slice:
// Read, PatientRead, Query, PatientQuery), and checked on the raw JSON of
// every event that claims one of them. checkBALP (validators_test.go)
// checks that custos claims a profile exactly when the record allows it;
// this checks that an event claiming a profile meets every rule of it:
// fixed codes, each slice's cardinality (slices are told apart by the
// pattern on type, as the profiles' discriminators say) and each slice's
// required and prohibited elements.

// balpCoding is a pattern on a Coding (system, code and display, as the
// FSH's `= system#code "display"` sets all three).
type balpCoding struct{ system, code, display string }

// balpSlice is one slice of agent or entity.
type balpSlice struct {
	name       string
	typ        balpCoding // the discriminator: agent.type.coding contains it, entity.type equals it
	min, max   int
	required   []string // elements 1..
	prohibited []string // elements 0..0
	role       []string // entity.role codes allowed (object-role), when set
	check      func(map[string]any) string
}

type balpRules struct {
	url            string
	subtypes       []string // restful-interaction codes of which one must be present
	action         string
	minAgents      int
	minEntities    int
	agents, entity []balpSlice
}

var (
	dcmDestination = balpCoding{fhirDICOM, "110152", "Destination Role ID"}
	dcmSource      = balpCoding{fhirDICOM, "110153", "Source Role ID"}
	ircp           = balpCoding{fhirParticipation, "IRCP", "information recipient"}
	systemObject   = balpCoding{fhirEntityType, "2", "System Object"}
	person         = balpCoding{fhirEntityType, "1", "Person"}
)

// networkAgent is the client or the server slice (Read and Query alike).
func networkAgent(name string, typ balpCoding) balpSlice {
	return balpSlice{name: name, typ: typ, min: 1, max: 1, required: []string{"who", "network"},
		prohibited: []string{"role", "altId", "name", "location", "policy", "media", "purposeOfUse"}}
}

var userAgent = balpSlice{name: "user", typ: ircp, min: 0, max: 1, required: []string{"who"},
	prohibited: []string{"altId", "location", "policy", "media", "network"},
	check: func(a map[string]any) string {
		if a["requestor"] != true {
			return "requestor is not true"
		}
		return ""
	}}

var patientEntity = balpSlice{name: "patient", typ: person, min: 1, max: 1, required: []string{"what"},
	prohibited: []string{"lifecycle", "securityLabel", "name", "query", "detail"}, role: []string{"1"},
	check: func(e map[string]any) string {
		if what, _ := e["what"].(map[string]any); what["type"] != nil && what["type"] != "Patient" {
			return fmt.Sprintf("what is a %v, only Reference(Patient)", what["type"])
		}
		return ""
	}}

func balpProfiles() []balpRules {
	read := balpRules{url: balpRead, subtypes: []string{"read", "vread"}, action: "R", minAgents: 2, minEntities: 1,
		agents: []balpSlice{networkAgent("client", dcmDestination), networkAgent("server", dcmSource), userAgent},
		entity: []balpSlice{{name: "data", typ: systemObject, min: 1, max: 1, required: []string{"what"},
			prohibited: []string{"lifecycle", "name", "query", "detail"}, role: []string{"4", "3", "20"}}}}
	query := balpRules{url: balpQuery, subtypes: []string{"search", "search-type", "search-system"}, action: "E", minAgents: 2, minEntities: 1,
		agents: []balpSlice{networkAgent("client", dcmSource), networkAgent("server", dcmDestination), userAgent},
		entity: []balpSlice{{name: "query", typ: systemObject, min: 1, max: 1, required: []string{"query"},
			prohibited: []string{"what", "lifecycle", "detail"}, role: []string{"24"}}}}
	patientRead, patientQuery := read, query
	patientRead.url, patientRead.minEntities = balpPatientRead, 2
	patientRead.entity = append(slices.Clone(read.entity), patientEntity)
	patientQuery.url = balpPatientQuery
	patientQuery.entity = append(slices.Clone(query.entity), patientEntity)
	return []balpRules{read, patientRead, query, patientQuery}
}

// codingIs reports whether the JSON Coding c equals the pattern p.
func codingIs(c any, p balpCoding) bool {
	m, _ := c.(map[string]any)
	return m["system"] == p.system && m["code"] == p.code && m["display"] == p.display
}

// matches reports whether the agent or entity x is in slice s (the
// pattern on type: a CodeableConcept for agents, a Coding for entities).
func (s balpSlice) matches(x map[string]any, agent bool) bool {
	if !agent {
		return codingIs(x["type"], s.typ)
	}
	t, _ := x["type"].(map[string]any)
	codings, _ := t["coding"].([]any)
	return slices.ContainsFunc(codings, func(c any) bool { return codingIs(c, s.typ) })
}

// checkProfile returns the rules of p that the event ev (raw JSON) breaks.
func checkProfile(ev map[string]any, p balpRules) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	if !codingIs(ev["type"], balpCoding{fhirAuditEventType, "rest", "Restful Operation"}) {
		fail("type %v, want audit-event-type#rest", ev["type"])
	}
	subtypes, _ := ev["subtype"].([]any)
	if !slices.ContainsFunc(subtypes, func(c any) bool {
		m, _ := c.(map[string]any)
		return m["system"] == fhirRestful && slices.Contains(p.subtypes, fmt.Sprint(m["code"]))
	}) {
		fail("subtype %v has none of %v", subtypes, p.subtypes)
	}
	for _, c := range subtypes { // anyRead, anyVread: (exactly)
		if m, _ := c.(map[string]any); m["system"] == fhirRestful && (m["code"] == "read" || m["code"] == "vread") && (len(m) != 3 || m["display"] != m["code"]) {
			fail("subtype %v is not exactly restful-interaction#%v %q", m, m["code"], m["code"])
		}
	}
	if ev["action"] != p.action {
		fail("action %v, want %s", ev["action"], p.action)
	}
	if ev["outcome"] != "0" {
		fail("outcome %v, fixed 0", ev["outcome"])
	}
	if ev["recorded"] == nil || ev["source"] == nil {
		fail("recorded or source missing")
	}
	for _, part := range []struct {
		key    string
		min    int
		slices []balpSlice
	}{{"agent", p.minAgents, p.agents}, {"entity", p.minEntities, p.entity}} {
		xs, _ := ev[part.key].([]any)
		if len(xs) < part.min {
			fail("%d %s, want at least %d", len(xs), part.key, part.min)
		}
		for _, s := range part.slices {
			n := 0
			for _, x := range xs {
				m, _ := x.(map[string]any)
				if !s.matches(m, part.key == "agent") {
					continue
				}
				n++
				for _, k := range s.required {
					if m[k] == nil {
						fail("%s[%s].%s is 1..1 and missing", part.key, s.name, k)
					}
				}
				for _, k := range s.prohibited {
					if m[k] != nil {
						fail("%s[%s].%s is 0..0 and present", part.key, s.name, k)
					}
				}
				if s.role != nil {
					r, _ := m["role"].(map[string]any)
					if r["system"] != fhirObjectRole || !slices.Contains(s.role, fmt.Sprint(r["code"])) {
						fail("%s[%s].role %v, want object-role %v", part.key, s.name, m["role"], s.role)
					}
				}
				if s.check != nil {
					if why := s.check(m); why != "" {
						fail("%s[%s]: %s", part.key, s.name, why)
					}
				}
				if part.key == "entity" && m["name"] != nil && m["query"] != nil {
					fail("entity[%s] has name and query (FHIR R4 sev-1)", s.name)
				}
			}
			if n < s.min || n > s.max {
				fail("%d %s[%s], want %d..%d", n, part.key, s.name, s.min, s.max)
			}
		}
	}
	return bad
}

// TestBALPProfilesClaimedAreMet: every exported AuditEvent that claims a
// BALP profile (realistic records of every kind, and records holding
// hostile text) meets every rule of that profile.
func TestBALPProfilesClaimedAreMet(t *testing.T) {
	profiles := map[string]balpRules{}
	for _, p := range balpProfiles() {
		profiles[p.url] = p
	}
	dir, _ := exportRealistic(t)
	hostile, _ := exportEntries(t, "node\u00a01", hostileEntries())
	claimed := map[string]int{}
	for _, d := range []string{dir, hostile} {
		for i, line := range lines(t, filepath.Join(d, FormatFHIR.FileName())) {
			var ev map[string]any
			if err := json.Unmarshal(line, &ev); err != nil {
				t.Fatal(err)
			}
			meta, _ := ev["meta"].(map[string]any)
			urls, _ := meta["profile"].([]any)
			for _, u := range urls {
				p, ok := profiles[fmt.Sprint(u)]
				if !ok {
					if strings.Contains(fmt.Sprint(u), "BALP") {
						t.Errorf("event %d (%v) claims %v, which is not a profile this test knows", i, ev["id"], u)
					}
					continue
				}
				claimed[p.url[strings.LastIndex(p.url, ".")+1:]]++
				for _, why := range checkProfile(ev, p) {
					t.Errorf("event %d (%v) claims %s: %s", i, ev["id"], p.url, why)
				}
			}
		}
	}
	for _, p := range []string{"Read", "PatientRead", "Query", "PatientQuery"} {
		if claimed[p] == 0 {
			t.Errorf("no event claims %s (claimed: %v): the check is vacuous", p, claimed)
		}
	}
	t.Logf("profiles claimed and checked: %v", claimed)
}
