package fhirsync_test

import (
	"context"
	"fmt"
	"log"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/fhirsync"
)

// A sync of a FHIR server with SMART Backend Services, signed by a local
// (--dev) key, recorded in an audit log, handing the staged Bulk layout to
// an importer. Run it again and only the changes are fetched.
func Example() {
	auditLog, err := audit.Open("data/audit.db", audit.Options{Node: "example"})
	if err != nil {
		log.Fatal(err)
	}
	defer auditLog.Close()
	key, kid, err := fhirsync.DevKey("data/sync-client-key.pem")
	if err != nil {
		log.Fatal(err)
	}
	s, err := fhirsync.New(fhirsync.Options{
		Base:     "https://ehr.example.org/fhir/R4",
		StateDir: "data",
		ClientID: "custos", Key: key, KeyID: kid,
		Importer: fhirsync.ImporterFunc(func(ctx context.Context, manifest string, full bool) (fhirsync.Imported, error) {
			// manifest lists <Type>.NNN.ndjson and deleted.NNN.ndjson beside it;
			// say how many deletions retired a resource the catalog held.
			return fhirsync.Imported{}, nil
		}),
		Recorder: fhirsync.AuditRecorder{Log: auditLog, Dev: true, Principal: audit.Principal{Sub: "example", ClientID: "custos"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	res, err := s.Run(context.Background())
	if err != nil {
		log.Fatal(err) // names the URL path; nothing was imported
	}
	fmt.Printf("%s sync: %d resources, %d deleted\n", res.Mode, res.Resources, res.Deleted)
}
