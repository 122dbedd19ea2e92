package app_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	bolt "go.etcd.io/bbolt"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/fhirin"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/secrets/vaulttest"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/store"
)

// oldRulesCatalog writes, in a new data directory with dev keys, the
// catalog a custos before the label rules version (and before the
// residence rule) left: testdata/fhir-corpus's location-home.json (a
// patient's home, v3-RoleCode PTRES, a street address) and a ward, both
// tenant-level and unlabelled, its labels settled but no label rules
// version recorded; with dk (not nil) encrypted at rest. It returns the
// data directory and the two URIs.
func oldRulesCatalog(t *testing.T, dk store.DataKeys) (data, home, ward string) {
	t.Helper()
	ctx := context.Background()
	data = t.TempDir()
	key := devIDKey(t, data)
	n, err := store.NewNamer("general-hospital", key.Bytes, key.ID)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "fhir-corpus", "location-home.json"))
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	if err := json.Compact(&body, raw); err != nil {
		t.Fatal(err)
	}
	es := []store.Entry{
		{Type: "Location", ID: "loc-home-4471", Body: body.Bytes(), Where: "Location.ndjson:1"},
		{Type: "Location", ID: "ward-3", Body: []byte(`{"resourceType":"Location","id":"ward-3","name":"Ward 3"}`), Where: "Location.ndjson:2"},
	}
	cat := filepath.Join(data, app.CatalogFile)
	if _, err := store.ImportEntriesStaged(ctx, cat, seq2(es), store.EntryOptions{Namer: n}, store.Options{DataKeys: dk}); err != nil {
		t.Fatal(err)
	}
	// What that custos kept in meta: the marker of settled labels
	// (store/doc.go), no label rules version.
	db, err := bolt.Open(cat, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket([]byte("meta"))
		if err := meta.Delete([]byte("label-rules")); err != nil {
			return err
		}
		return meta.Put([]byte("settled-txid"), binary.BigEndian.AppendUint64(nil, uint64(tx.ID())))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return data, n.Link("Location", "loc-home-4471", ""), n.Link("Location", "ward-3", "")
}

// devIDKey is the resource id key of the dev keys of data (persisted
// there, drawn if missing), as custos import uses them.
func devIDKey(t *testing.T, data string) secrets.Key {
	t.Helper()
	dev, err := secrets.NewDev()
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.PersistIn(data); err != nil {
		t.Fatal(err)
	}
	key, err := dev.IDKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// devHTTPOptions serves data over HTTP on loopback with dev keys to one
// bearer token, of principal (JSON).
func devHTTPOptions(t *testing.T, data, token, principal string) app.Options {
	t.Helper()
	tf, err := server.ParseTokenFile([]byte(`{"tokens":[{"token_sha256":"` + server.HashToken(token) + `","principal":` + principal + `}]}`))
	if err != nil {
		t.Fatal(err)
	}
	return app.Options{DataDir: data, Dev: true, Node: "test", HTTP: &app.HTTPOptions{Listen: "127.0.0.1:0", Tokens: tf}}
}

// seq2 adapts a slice iterator to the stream ImportEntries takes.
func seq2(es []store.Entry) func(func(store.Entry, error) bool) {
	return func(yield func(store.Entry, error) bool) {
		for _, e := range es {
			if !yield(e, nil) {
				return
			}
		}
	}
}

// A catalog imported before the label rules had a version holds a
// patient's home Location unlabelled, and the default policy served it to
// billers as tenant-level reference data (serve did not check). serve now
// refuses to open it, naming why and 'custos store relabel'; RelabelCatalog
// labels the home residence (the ward stays reference data) and records
// the rules' version; then serve opens it, and a biller lists and reads
// the ward but neither lists nor reads the home.
func TestServeRefusesACatalogLabelledWithOlderRules(t *testing.T) {
	ctx := context.Background()
	data, home, ward := oldRulesCatalog(t, nil)
	o := devHTTPOptions(t, data, "biller-token", `{"sub":"b","roles":["billing"],"client_id":"c","tenant":"general-hospital","patients":[],"purpose_of_use":"HPAYMT"}`)

	a, err := app.Open(ctx, o)
	if err == nil {
		a.Close()
		t.Fatal("serve opened a catalog whose home Location older label rules left unlabelled")
	}
	if !errors.Is(err, store.ErrOldLabelRules) || !strings.Contains(err.Error(), "custos store relabel") || !strings.Contains(err.Error(), "predate every label rules version") {
		t.Fatalf("Open = %v, want ErrOldLabelRules saying why and naming custos store relabel", err)
	}
	if _, err := os.Stat(filepath.Join(data, app.AuditFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused serve left an audit log: %v", err)
	}

	rep, err := app.RelabelCatalog(ctx, filepath.Join(data, app.CatalogFile), app.Relabel{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Read != 2 || rep.Relabelled != 1 || rep.Added["residence"] != 1 || len(rep.Removed) != 0 {
		t.Errorf("relabel: %+v, want both read and the home alone labelled residence", rep)
	}

	audittest.VerifyOnCleanup(t, filepath.Join(data, app.AuditFile))
	a, err = app.Open(ctx, o)
	if err != nil {
		t.Fatalf("serve after relabel: %v", err)
	}
	defer a.Close()
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- a.Serve(sctx) }()
	client := mcp.NewClient(&mcp.Implementation{Name: "relabel-test", Version: "1"}, nil)
	cs, err := client.Connect(sctx, &mcp.StreamableClientTransport{Endpoint: a.URL(), HTTPClient: &http.Client{Transport: bearer{"biller-token"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	page, err := cs.ListResources(sctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, r := range page.Resources {
		listed = append(listed, r.URI)
	}
	if !slices.Equal(listed, []string{ward}) {
		t.Errorf("biller lists %v, want the ward alone (%s)", listed, ward)
	}
	if _, err := cs.ReadResource(sctx, &mcp.ReadResourceParams{URI: ward}); err != nil {
		t.Errorf("biller reads the ward: %v", err)
	}
	if res, err := cs.ReadResource(sctx, &mcp.ReadResourceParams{URI: home}); err == nil {
		t.Errorf("biller read the patient's home: %v", res.Contents)
	}
	cs.Close()
	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve = %v", err)
	}
}

// An encrypted catalog (data keys from a real Vault dev server's Transit,
// as serve opens it; skipped without a Vault binary, failing under
// CI=true) is relabelled with the Vault provider, which decrypts the
// stored bodies: refused for serve before, the home labelled residence
// after, and the catalog opens as serve opens it. Without keys relabel is
// refused, naming the encryption, and changes nothing.
func TestRelabelEncryptedWithVault(t *testing.T) {
	ctx := context.Background()
	srv := vaulttest.Start(t, vaulttest.Options{})
	p, err := srv.Provision(ctx, vaulttest.ProvisionOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	v, err := secrets.OpenVault(ctx, secrets.VaultOptions{Address: srv.Addr, Token: p.Token})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	data, home, _ := oldRulesCatalog(t, v)
	cat := filepath.Join(data, app.CatalogFile)
	serveOpens := func() error {
		l, err := store.OpenLive(cat, store.LiveOptions{Options: store.Options{DataKeys: v}, LabelRules: fhirin.LabelRules})
		if err == nil {
			l.Close()
		}
		return err
	}
	if err := serveOpens(); !errors.Is(err, store.ErrOldLabelRules) {
		t.Fatalf("before relabel: %v, want ErrOldLabelRules", err)
	}
	before, err := os.ReadFile(cat)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := app.RelabelCatalog(ctx, cat, app.Relabel{}); !errors.Is(err, store.ErrEncrypted) {
		t.Fatalf("relabel without keys: %v, want ErrEncrypted", err)
	}
	if after, _ := os.ReadFile(cat); !bytes.Equal(after, before) {
		t.Fatal("a refused relabel changed the catalog")
	}
	rep, err := app.RelabelCatalog(ctx, cat, app.Relabel{DataKeys: v})
	if err != nil || rep.Read != 2 || rep.Added["residence"] != 1 {
		t.Fatalf("relabel with Vault: %+v %v", rep, err)
	}
	if err := serveOpens(); err != nil {
		t.Fatalf("after relabel: %v", err)
	}
	st, err := store.Open(cat, store.Options{ReadOnly: true, DataKeys: v})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := st.Get(home)
	if err != nil || !slices.Equal(r.Labels.Sensitivity, []string{"residence"}) {
		t.Fatalf("home after relabel: %+v %v", r.Labels, err)
	}
	if body, err := st.Blob(ctx, r.Digest); err != nil || !bytes.Contains(body, []byte("PTRES")) {
		t.Errorf("home body after relabel: %v", err)
	}
}
