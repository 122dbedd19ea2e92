package app_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/store"
)

// A catalog custos ac158dd (2026-11-29) wrote from HL7's opt-out example
// (store/testdata/catalog-ac158dd) has none of the label indexes, and the
// opted-out patient's Observation lacks "opt-out". Served as it was after
// an upgrade, a researcher and a biller were given that patient's data
// until the next import settled the labels (measured on upgrade day: a
// researcher listed 159 resources of an ac158dd data directory before that
// import, 158 after). serve now refuses such a catalog, naming why and
// what to run; the import settles it, and then it serves, labelled.
func TestServeRefusesACatalogWithUnsettledLabels(t *testing.T) {
	serveRefusesThenSettles(t, "catalog-ac158dd", "optout")
}

// A catalog this custos wrote (HL7's Observation of f001, label indexes
// built), into which custos ac158dd then imported HL7's opt-out Consent
// for f001 (store/testdata/catalog-stale-ac158dd): the indexes exist but
// are stale, and the Observation lacks "opt-out". Before the marker of
// settled labels serve opened it and a researcher listed the Observation;
// now serve refuses it, and a re-import with this custos settles it.
func TestServeRefusesACatalogWhoseLabelsAnOlderCustosLeftStale(t *testing.T) {
	serveRefusesThenSettles(t, "catalog-stale-ac158dd", "older than this one")
}

// serveRefusesThenSettles checks that serve refuses the catalog of
// store/testdata/DIR with ErrUnsettledLabels whose text holds why, and that
// after a re-import of HL7's opt-out example with this custos, and a
// relabel (the catalog predates the label rules version), it serves, both
// items labelled opt-out.
func serveRefusesThenSettles(t *testing.T, dir, why string) {
	ctx := context.Background()
	data := t.TempDir()
	for _, name := range []string{app.CatalogFile, secrets.DevKeyFile} {
		b, err := os.ReadFile(filepath.Join("..", "store", "testdata", dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	o := devHTTPOptions(t, data, "t", `{"sub":"r","roles":["researcher"],"client_id":"c","tenant":"general-hospital","patients":[],"purpose_of_use":"HRESCH"}`)

	a, err := app.Open(ctx, o)
	if err == nil {
		a.Close()
		t.Fatal("serve opened a catalog whose opt-out labels an older custos left unsettled")
	}
	if !errors.Is(err, store.ErrUnsettledLabels) || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), "custos import") {
		t.Fatalf("Open = %v, want ErrUnsettledLabels saying %q and naming custos import", err, why)
	}

	idKey := devIDKey(t, data)
	rep, err := app.ImportFHIR(ctx, filepath.Join(data, app.CatalogFile), filepath.Join("..", "fhirin", "testdata", "outside", "hl7-r4-consent"),
		app.FHIRImport{Tenant: "general-hospital", IDKey: idKey})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Created != 0 || rep.Updated+rep.Relabelled != 2 {
		t.Errorf("re-import: %+v, want nothing created and the Consent and Observation given their labels", rep)
	}

	// Labelled before the label rules had a version, the catalog is
	// refused for that next (TestServeRefusesACatalogLabelledWithOlderRules),
	// and relabelled.
	if _, err := app.Open(ctx, o); !errors.Is(err, store.ErrOldLabelRules) {
		t.Fatalf("serve after the settling import = %v, want ErrOldLabelRules (an incremental import does not relabel the catalog)", err)
	}
	if _, err := app.RelabelCatalog(ctx, filepath.Join(data, app.CatalogFile), app.Relabel{}); err != nil {
		t.Fatal(err)
	}
	a, err = app.Open(ctx, o)
	if err != nil {
		t.Fatalf("serve after the settling import and relabel: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(data, app.CatalogFile), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rs, err := st.Page("", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("catalog holds %d resources, want 2", len(rs))
	}
	for _, r := range rs {
		if !slices.Contains(r.Labels.Consent, store.ConsentOptOut) {
			t.Errorf("%s (%s) after the settling import: consent labels %v, want opt-out", r.Labels.Type, r.URI, r.Labels.Consent)
		}
	}
}
