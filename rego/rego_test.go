package rego_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"testing"

	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/rego"
)

func TestEmbeddedFiles(t *testing.T) {
	for _, name := range []string{"custos/authz.rego", "custos/authz_test.rego"} {
		b, err := fs.ReadFile(rego.FS, name)
		if err != nil || len(b) == 0 {
			t.Errorf("%s: %v (len %d)", name, err, len(b))
		}
	}
}

// TestPolicyUnitTests runs the embedded Rego tests, so that
// go test ./rego/ alone checks the policy.
func TestPolicyUnitTests(t *testing.T) {
	sum, err := policy.RunTests(context.Background(), rego.FS)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range sum.Failures {
		t.Error(f)
	}
	if sum.Passed == 0 {
		t.Fatal("no Rego tests ran")
	}
}

// TestWorkedExample is the example of docs/policy.md.
func TestWorkedExample(t *testing.T) {
	ctx := context.Background()
	e, err := policy.Default(ctx, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var in policy.Input
	if err := json.Unmarshal([]byte(`{
  "principal": {"sub": "rita.research", "roles": ["researcher"], "client_id": "study-assistant",
                "tenant": "general-hospital", "patients": []},
  "purpose_of_use": "HRESCH",
  "action": "read",
  "resource": {"uri": "custos://general-hospital/patient/0c6e2b7d-5a44-4d39-8f0f-9b1e7c3a2d02",
               "type": "patient", "patient": "0c6e2b7d-5a44-4d39-8f0f-9b1e7c3a2d02",
               "tenant": "general-hospital", "sensitivity": ["vip"], "consent": []}
}`), &in); err != nil {
		t.Fatal(err)
	}
	d, err := e.Decide(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(struct {
		Allow       bool
		Reasons     []string
		Obligations any
	}{d.Allow, d.Reasons, d.Obligations})
	const want = `{"Allow":true,"Reasons":["research_deidentified","vip_patient"],"Obligations":[` +
		`{"op":"remove","path":"/name"},{"op":"remove","path":"/telecom"},` +
		`{"op":"remove","path":"/identifier"},{"op":"remove","path":"/text"},` +
		`{"op":"remove","path":"/contact"},{"op":"remove","path":"/photo"},` +
		`{"op":"remove","path":"/extension"},{"op":"remove","path":"/address/*/line"},` +
		`{"op":"remove","path":"/address/*/city"},{"op":"remove","path":"/address/*/district"},` +
		`{"op":"generalize","path":"/address/*/postalCode","fn":"zip3"},` +
		`{"op":"generalize","path":"/birthDate","fn":"birthyear90"}]}`
	if string(got) != want {
		t.Errorf("decision\n got %s\nwant %s", got, want)
	}
	in.Resource.Consent = []string{"opt-out"}
	d, err = e.Decide(ctx, in)
	if err != nil || d.Allow || len(d.Reasons) != 1 || d.Reasons[0] != "patient_opted_out" {
		t.Errorf("opt-out: %+v, %v; want deny [patient_opted_out]", d, err)
	}
}
