package e2e

import (
	"testing"

	"github.com/custos-mcp/custos/fhirsync"
)

// TestSyncRESTDeletionDuringPagingRetiresNoLiveResource: a full REST sync
// pages each search by the server's next links; a resource deleted on the
// server while the sync pages through its type must not make the sync
// retire a resource that is still live on the server (the real server
// pages by _offset, as many do: the deletion shifts every later match one
// place back, and one is on no page).
func TestSyncRESTDeletionDuringPagingRetiresNoLiveResource(t *testing.T) {
	env := newSyncEnv(t)
	srv := startFHIRServer(t, fhirServerConfig{ClientID: "custos-sync", JWKS: env.jwks, Bulk: "none", Seed: map[string]int{"resources": 60}})
	o := env.options(srv)
	o.PageSize = 5
	if _, err := env.run(t, o); err != nil {
		t.Fatal(err)
	}
	var obs []string
	srv.control(t, "ids", map[string]any{"type": "Observation"}, &obs)
	if len(obs) < 12 {
		t.Fatalf("%d Observations on the server: the test would prove little", len(obs))
	}
	deleted := false
	o.Full = true
	o.Progress = func(p fhirsync.Progress) {
		if p.Phase == "search" && p.Detail == "Observation" && !deleted {
			deleted = true // after the first page of Observations
			srv.control(t, "delete", map[string]any{"type": "Observation", "id": obs[0]}, nil)
		}
	}
	if _, err := env.run(t, o); err != nil || !deleted {
		t.Fatalf("full sync (an Observation deleted after its first page: %v): %v", deleted, err)
	}
	var live []string
	srv.control(t, "ids", map[string]any{"type": "Observation"}, &live)
	var lost []string
	for _, id := range live {
		if env.imp.retired["Observation/"+id] {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		t.Fatalf("a full REST sync during which the server deleted one Observation retired %d live ones (%v)", len(lost), lost)
	}
}
