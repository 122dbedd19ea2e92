package server

import (
	"testing"

	"github.com/custos-mcp/custos/store"
)

// TestSameDecidedComparesDecisionInputs: an indexed list item is released
// only if the record read afterwards has the version, content, MIME type
// and labels it was decided on; a file from another lineage can repeat a
// version and digest with other labels (an opt-out added).
func TestSameDecidedComparesDecisionInputs(t *testing.T) {
	r := store.Resource{Version: 1, Digest: "sha256:aa", MIMEType: store.MIMEFHIR,
		Labels: store.Labels{Tenant: "t", Patient: "p", Type: "observation", Sensitivity: []string{"hiv"}}}
	if !sameDecided(r, r) {
		t.Fatal("the same record is not the same")
	}
	for name, change := range map[string]func(*store.Resource){
		"version":     func(x *store.Resource) { x.Version = 2 },
		"digest":      func(x *store.Resource) { x.Digest = "sha256:bb" },
		"mime":        func(x *store.Resource) { x.MIMEType = "text/plain" },
		"patient":     func(x *store.Resource) { x.Labels.Patient = "q" },
		"sensitivity": func(x *store.Resource) { x.Labels.Sensitivity = nil },
		"consent":     func(x *store.Resource) { x.Labels.Consent = []string{"opt-out"} },
	} {
		full := r
		full.Labels.Sensitivity = append([]string(nil), r.Labels.Sensitivity...)
		change(&full)
		if sameDecided(full, r) {
			t.Errorf("a changed %s is taken as what was decided", name)
		}
	}
}
