package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/fhirsync"
	"github.com/custos-mcp/custos/store"
)

// TestSyncOptionsChecked: the scheduled sync is validated with the rest:
// a base URL that could carry credentials, a schedule under a minute, a
// missing importer, and sync keys without a base are each a problem.
func TestSyncOptionsChecked(t *testing.T) {
	imp := func(store.DataKeys) fhirsync.Importer {
		return fhirsync.ImporterFunc(func(context.Context, string, bool) (fhirsync.Imported, error) { return fhirsync.Imported{}, nil })
	}
	for _, tc := range []struct {
		name  string
		sync  app.SyncOptions
		given []string
		want  []string
	}{
		{"none", app.SyncOptions{}, nil, nil},
		{"valid", app.SyncOptions{FHIRBase: "https://ehr.example.org/fhir", Every: time.Hour, ClientID: "custos", Tenant: "t", Importer: imp}, nil, nil},
		{"no tenant", app.SyncOptions{FHIRBase: "https://ehr.example.org/fhir", Importer: imp}, nil,
			[]string{"sync.tenant: required with sync.fhir_base: the tenant the synced resources belong to"}},
		{"credentials in the base", app.SyncOptions{FHIRBase: "https://u:p@ehr.example.org/fhir", Tenant: "t", Importer: imp}, nil,
			[]string{"sync.fhir_base: want http(s)://HOST[:PORT][/PATH] without credentials, a query or a fragment"}},
		{"too often", app.SyncOptions{FHIRBase: "http://127.0.0.1:8080/fhir", Every: time.Second, Tenant: "t", Importer: imp}, nil,
			[]string{"sync.every: must be 1m0s or more, got 1s"}},
		{"client id without a base", app.SyncOptions{ClientID: "custos"}, []string{"sync.client_id"},
			[]string{"sync.client_id: needs sync.fhir_base"}},
		{"scope", app.SyncOptions{FHIRBase: "https://ehr.example.org/fhir", ClientID: "custos", Scope: "system/Patient.rs system/Observation.rs", Tenant: "t", Importer: imp}, nil, nil},
		{"scope without a client id", app.SyncOptions{FHIRBase: "https://ehr.example.org/fhir", Scope: "system/*.rs", Tenant: "t", Importer: imp}, nil,
			[]string{"sync.scope: needs sync.client_id: the scope is asked for with the client's token"}},
		{"scope not scope tokens", app.SyncOptions{FHIRBase: "https://ehr.example.org/fhir", ClientID: "custos", Scope: "system/*.rs  \"x\"", Tenant: "t", Importer: imp}, nil,
			[]string{"sync.scope: want scope tokens (printable ASCII, no quote or backslash) separated by single spaces"}},
		{"scope without a base", app.SyncOptions{Scope: "system/*.rs"}, []string{"sync.scope"},
			[]string{"sync.scope: needs sync.fhir_base"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := app.Options{DataDir: t.TempDir(), Dev: true, HTTP: &app.HTTPOptions{Listen: "127.0.0.1:0", TokensFile: "t.json"}, Sync: tc.sync}
			given := map[string]bool{}
			for _, g := range tc.given {
				given[g] = true
			}
			var got []string
			for _, p := range o.Check(app.CheckOptions{SkipFiles: true, Given: func(k string) bool { return given[k] }}) {
				got = append(got, p.String())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
