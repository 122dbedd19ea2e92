package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/store"
)

// TestBreakTheGlassOnImportedFHIR: on a catalog made by 'custos import' of
// FHIR data, the URIs a clinician sees carry a keyed patient id, while the
// policy compares the source Patient id. The operator at 3 a.m. copies the
// id the clinician sees (a URI's patient segment) into 'btg grant': the
// emergency read must then be allowed (it was silently denied: the grant
// named the segment, which no resource's labels name). And a patient id is
// unique within a tenant only: the same bundle imported into tenants t and
// u holds two patients "p1"; a grant made from a URI of t's p1 must not
// let a clinician of u read u's p1 (it did: grants named no tenant), and
// that refusal looks to the caller exactly like a resource that does not
// exist. Found by probe-btg with a real serve --dev and go-sdk client.
func TestBreakTheGlassOnImportedFHIR(t *testing.T) {
	dir := t.TempDir()
	d := &dataset{data: filepath.Join(dir, "data")}
	bundle := filepath.Join(repo, "cmd", "custos", "testdata", "fhir", "docref.json")
	for _, tenant := range []string{"t", "u"} {
		mustCustos(t, "import", "--data-dir", d.data, "--tenant", tenant, bundle)
	}
	// The URIs of each tenant's p1: its Patient and its DocumentReference.
	st, err := store.Open(filepath.Join(d.data, "catalog.db"), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := st.Page("", 1000)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	patientURI, docURI := map[string]string{}, map[string]string{}
	for _, r := range rs {
		switch r.Labels.Type {
		case store.TypePatient:
			patientURI[r.Labels.Tenant] = r.URI
		case "documentreference":
			docURI[r.Labels.Tenant] = r.URI
		}
	}
	if len(patientURI) != 2 || len(docURI) != 2 || patientURI["t"] == "" || docURI["u"] == "" {
		t.Fatalf("want a Patient and a DocumentReference of p1 in t and u, got %v %v", patientURI, docURI)
	}
	segT := strings.Split(patientURI["t"], "/")[4]

	tokens := filepath.Join(dir, "tokens.json")
	tok := map[string]string{}
	for _, tenant := range []string{"t", "u"} {
		p := filepath.Join(dir, "er-"+tenant+".json")
		b, _ := json.Marshal(map[string]any{"sub": "dr-" + tenant, "roles": []string{"clinician"}, "client_id": "ed-assistant",
			"tenant": tenant, "patients": []string{}, "purpose_of_use": "ETREAT"})
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		tok[tenant] = newToken(t, p, tokens)
	}
	srv := serve(t, d, nil, "--dev", "--listen", loopback, "--tokens", tokens)
	ctx := context.Background()
	read := func(tenant, uri string) error {
		_, err := connect(t, srv.url, tok[tenant]).ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		return err
	}
	if read("t", docURI["t"]) == nil {
		t.Fatal("an ETREAT read without a grant was allowed")
	}
	grant := func(sub, patient string) {
		t.Helper()
		mustCustos(t, "btg", "grant", "--data-dir", d.data, "--sub", sub, "--patient", patient,
			"--reason", "unconscious patient in ED, no chart access", "--ttl", "10m")
	}

	// The id the clinician sees.
	grant("dr-t", segT)
	for deadline := time.Now().Add(10 * time.Second); read("t", docURI["t"]) != nil; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a grant naming the URI's patient segment never let dr-t read %s", docURI["t"])
		}
	}

	// t's p1 is not u's p1.
	grant("dr-u", patientURI["t"])
	time.Sleep(2500 * time.Millisecond) // two syncs: the grant is loaded
	denied := read("u", docURI["u"])
	if denied == nil {
		t.Fatal("a grant for tenant t's patient p1 let a clinician of tenant u read u's p1")
	}
	missing := strings.Replace(docURI["u"], strings.Split(docURI["u"], "/")[6], "00000000-0000-8000-8000-000000000000", 1)
	if nf := read("u", missing); nf == nil || nf.Error() != denied.Error() {
		t.Errorf("a denied read and a read of nothing differ:\n denied:    %v\n not found: %v", denied, nf)
	}
	srv.stop(t)
	var tenants []string
	for _, r := range d.records(t) {
		if r.Action == "btg/grant" {
			tenants = append(tenants, strings.Fields(r.Reason)[2])
		}
	}
	if strings.Join(tenants, " ") != "tenant=t tenant=t" {
		t.Errorf("btg/grant records name tenants %v, want both t", tenants)
	}
}
