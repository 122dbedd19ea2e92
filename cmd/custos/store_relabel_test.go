package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/store"
)

// The CLI side of an upgrade past a label rule, on the catalog custos
// 4fe62b8 wrote from a patient's home Location
// (store/testdata/catalog-before-label-rules: the home unlabelled, no
// label rules version), which it and every custos until the version served
// to billers as reference data: serve exits 1, naming why and the command
// that fixes it, and creates no audit log; 'custos store relabel --dry-run
// --json' reports the home gaining residence and leaves the file
// byte-identical; 'custos store relabel' labels it; run again, it changes
// nothing.
func TestStoreRelabelCommand(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"catalog.db", "dev-keys.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "store", "testdata", "catalog-before-label-rules", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	principal := filepath.Join(dir, "biller.json")
	if err := os.WriteFile(principal, []byte(`{"sub":"b","roles":["billing"],"client_id":"c","tenant":"general-hospital","patients":[],"purpose_of_use":"HPAYMT"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cat := filepath.Join(data, "catalog.db")

	code, _, stderr := runCustos("serve", "--dev", "--data-dir", data, "--stdio", "--principal-file", principal)
	if code != 1 || !strings.Contains(stderr, "predate every label rules version") || !strings.Contains(stderr, "'custos store relabel --data-dir "+data+"'") {
		t.Fatalf("serve on the old catalog: exit %d, want 1 naming why and custos store relabel:\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(data, "audit.db")); !os.IsNotExist(err) {
		t.Errorf("a refused serve created audit.db: %v", err)
	}

	sum := func() []byte {
		b, err := os.ReadFile(cat)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	before := sum()
	report := func(args ...string) store.RelabelReport {
		t.Helper()
		code, stdout, stderr := runCustos(append([]string{"store", "relabel", "--data-dir", data, "--json"}, args...)...)
		var rep store.RelabelReport
		if code != 0 || json.Unmarshal([]byte(stdout), &rep) != nil {
			t.Fatalf("store relabel %v: exit %d\nstdout: %s\nstderr: %s", args, code, stdout, stderr)
		}
		return rep
	}
	if rep := report("--dry-run"); !rep.DryRun || rep.Read != 1 || rep.Relabelled != 1 || rep.Added["residence"] != 1 || rep.Rules == 0 {
		t.Errorf("dry run: %+v, want the home to gain residence", rep)
	}
	if !bytes.Equal(sum(), before) {
		t.Fatal("store relabel --dry-run changed catalog.db")
	}
	if des, err := os.ReadDir(data); err != nil || len(des) != 2 {
		t.Fatalf("store relabel --dry-run left files in the data directory: %v %v", des, err)
	}
	if rep := report(); rep.DryRun || rep.Relabelled != 1 || rep.Added["residence"] != 1 {
		t.Errorf("relabel: %+v, want the home to gain residence", rep)
	}
	after := sum()
	if rep := report(); rep.Relabelled != 0 || len(rep.Added) != 0 {
		t.Errorf("second relabel: %+v, want nothing to change", rep)
	}
	if !bytes.Equal(sum(), after) {
		t.Error("a second store relabel changed catalog.db")
	}
	st, err := store.Open(cat, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rs, err := st.Page("", 10)
	if err != nil || len(rs) != 1 || strings.Join(rs[0].Labels.Sensitivity, ",") != "residence" {
		t.Fatalf("after relabel: %+v %v, want the home labelled residence", rs, err)
	}
	if code, stdout, _ := runCustos("store", "relabel", "--data-dir", data); code != 0 || !strings.Contains(stdout, "relabelled 0") {
		t.Errorf("store relabel (text): exit %d: %s", code, stdout)
	}
	if code, _, stderr := runCustos("store", "relabel", "--data-dir", filepath.Join(dir, "none")); code != 1 || !strings.Contains(stderr, "catalog not found") {
		t.Errorf("store relabel of a missing catalog: exit %d: %s", code, stderr)
	}
}
