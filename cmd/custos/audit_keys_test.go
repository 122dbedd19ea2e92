package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/secrets"
	"github.com/custos-mcp/custos/secrets/vaulttest"
)

// TestPatientLookupsSearchEveryKeyVersion runs the real commands against a
// real Vault: after four rotations of the audit key, with a disclosure
// about one patient written under each of the five versions, the 164.528
// accounting (audit report --patient --disclosures) finds all five and
// names the versions it searched, and audit hash gives a lookup value under
// each. Once a version is destroyed in Vault both fail closed, naming it;
// with --accept-key-gap they search the rest and state the gap.
func TestPatientLookupsSearchEveryKeyVersion(t *testing.T) {
	ctx := context.Background()
	srv, p := auditorVault(t)
	const patient = "0b5c1f7e-3c2a-4d7e-9f10-2a3b4c5d6e7f"
	dir := t.TempDir()
	log := audittest.OpenPath(t, filepath.Join(dir, "audit.db"), audit.Options{})
	keyID := func(ver int) string { return "secret/custos/audit-hmac-key@" + strconv.Itoa(ver) }
	for ver := 1; ver <= 5; ver++ {
		key := p.AuditKey
		if ver > 1 {
			key = bytes.Repeat([]byte{byte(0x40 + ver)}, 32)
			if got, err := srv.RotateKV(ctx, p.Layout.AuditKeyPath, key); err != nil || got != ver {
				t.Fatalf("rotation to version %d: %d %v", ver, got, err)
			}
		}
		// A disclosure (purpose not treatment, payment or operations) and
		// a record about someone else, each keyed under version ver.
		for _, who := range []string{patient, "9d9d9d9d-0000-4000-8000-000000000000"} {
			ps := audit.Pseudonym(key, who)
			if _, err := log.Append(ctx, audit.Entry{Action: "resources/read", Outcome: audit.OutcomeAllow, Reason: "legal_request",
				Principal: audit.Principal{Sub: "counsel-" + strconv.Itoa(ver), Roles: []string{"legal"}}, PurposeOfUse: "HLEGAL",
				URIs: []string{"fhir://t/patients/" + ps + "/Condition/c" + strconv.Itoa(ver)}, Patients: []string{ps},
				Keys: []string{"audit-hmac=" + keyID(ver)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	log.Close()
	custos := func(args ...string) (string, string, int) {
		var stdout, stderr bytes.Buffer
		// Patient lookups are accounting requests (PATRQT), audited like every read of the log.
		code := run(append(args, "--data-dir", dir, "--purpose", "PATRQT"), &stdout, &stderr)
		return stdout.String(), stderr.String(), code
	}
	all := []string{keyID(5), keyID(4), keyID(3), keyID(2), keyID(1)}
	accounting := func(extra ...string) (rows []string, kv struct {
		Searched    []string
		NotSearched []struct{ Key, Problem string } `json:"not_searched"`
		GapAccepted bool                            `json:"gap_accepted"`
	}) {
		t.Helper()
		out, errOut, code := custos(append([]string{"audit", "report", "--patient", patient, "--disclosures", "--json"}, extra...)...)
		if code != 0 {
			t.Fatalf("audit report: exit %d\n%s%s", code, out, errOut)
		}
		var rep struct {
			Rows        []struct{ User string }
			KeyVersions *json.RawMessage `json:"key_versions"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.KeyVersions == nil {
			t.Fatalf("report JSON: %v\n%s", err, out)
		}
		json.Unmarshal(*rep.KeyVersions, &kv)
		for _, r := range rep.Rows {
			rows = append(rows, r.User)
		}
		return rows, kv
	}

	rows, kv := accounting()
	if strings.Join(rows, " ") != "counsel-1 counsel-2 counsel-3 counsel-4 counsel-5" {
		t.Fatalf("the accounting found %v, want the disclosure under each of the five key versions", rows)
	}
	if strings.Join(kv.Searched, " ") != strings.Join(all, " ") || len(kv.NotSearched) != 0 || kv.GapAccepted {
		t.Fatalf("key versions searched: %+v", kv)
	}
	// The view is the 10 records written, the access record of the
	// accounting above and this report's own: every read of the log is
	// itself recorded before it reads.
	out, _, code := custos("audit", "report", "--patient", patient, "--disclosures")
	if code != 0 || !strings.Contains(out, "audit key versions searched: "+strings.Join(all, ", ")+"\n") || !strings.Contains(out, "5 of 12 records match") {
		t.Fatalf("text report:\n%s", out)
	}
	out, _, code = custos("audit", "hash", patient)
	if code != 0 || strings.Count(out, "\taudit key secret/custos/audit-hmac-key@") != 5 || !strings.Contains(out, "audit key versions searched: "+strings.Join(all, ", ")) {
		t.Fatalf("audit hash:\n%s", out)
	}

	// A destroyed version: every lookup fails closed and names it.
	if err := srv.Root().KVv2(p.Layout.KVMount).Destroy(ctx, p.Layout.AuditKeyPath, []int{2}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"audit", "report", "--patient", patient, "--disclosures"},
		{"audit", "report", "--patient", patient, "--json"},
		{"audit", "hash", patient},
	} {
		out, errOut, code := custos(args...)
		if code == 0 || !strings.Contains(errOut, keyID(2)+" (destroyed in Vault)") || !strings.Contains(errOut, "--accept-key-gap") ||
			strings.Contains(out, "counsel-") {
			t.Fatalf("%v with version 2 destroyed: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	// Accepting the gap: the other four are found, and the gap is stated.
	rows, kv = accounting("--accept-key-gap")
	if strings.Join(rows, " ") != "counsel-1 counsel-3 counsel-4 counsel-5" || !kv.GapAccepted ||
		len(kv.NotSearched) != 1 || kv.NotSearched[0].Key != keyID(2) || kv.NotSearched[0].Problem != "destroyed in Vault" {
		t.Fatalf("accepted gap: rows %v, key versions %+v", rows, kv)
	}
	out, _, code = custos("audit", "report", "--patient", patient, "--disclosures", "--accept-key-gap")
	if code != 0 || !strings.Contains(out, "NOT searched: "+keyID(2)+" (destroyed in Vault)") || !strings.Contains(out, "GAP ACCEPTED") {
		t.Fatalf("text report with an accepted gap:\n%s", out)
	}
}

// TestPubkeyJSONNamesEveryVersion: after a rotation of the signing key in a
// real Vault, 'audit pubkey --json' names each line of the verifier key
// file with its version and the key id audit records give it, the latest
// marked, and the file stays key lines only.
func TestPubkeyJSONNamesEveryVersion(t *testing.T) {
	srv, p := auditorVault(t)
	if err := srv.RotateTransit(context.Background(), p.Layout.SigningKey); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "custos.vkeys")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"audit", "pubkey", "--data-dir", dir, "--origin", "h.example/n1/audit", "--json", "-o", file}, &stdout, &stderr); code != 0 {
		t.Fatalf("audit pubkey --json: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	var got pubkeyJSON
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, stdout.String())
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	id := func(ver int) string {
		return "signing=" + p.Layout.TransitMount + "/" + p.Layout.SigningKey + "@" + strconv.Itoa(ver)
	}
	if got.Origin != "h.example/n1/audit" || len(got.Keys) != 2 || len(lines) != 2 {
		t.Fatalf("origin %q, %d keys, %d file lines; want h.example/n1/audit, 2, 2:\n%s", got.Origin, len(got.Keys), len(lines), stdout.String())
	}
	for i, k := range got.Keys {
		if k.Version != i+1 || k.KeyID != id(i+1) || k.Latest != (i == 1) || k.VerifierKey != lines[i] {
			t.Errorf("key %d = %+v; want version %d, key id %s, latest %v, the file's line %q", i, k, i+1, id(i+1), i == 1, lines[i])
		}
		if !strings.HasPrefix(lines[i], "h.example/n1/audit+") {
			t.Errorf("file line %d = %q: not a key line", i, lines[i])
		}
	}
}

// auditorVault starts and provisions a real Vault and points the commands
// at it (VAULT_ADDR, VAULT_TOKEN) with the auditor's policy.
func auditorVault(t *testing.T) (*vaulttest.Server, *vaulttest.Provisioned) {
	t.Helper()
	srv := vaulttest.Start(t, vaulttest.Options{})
	ctx := context.Background()
	p, err := srv.Provision(ctx, vaulttest.ProvisionOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := srv.TokenWithPolicy(ctx, secrets.AuditorPolicyName, secrets.AuditorPolicyHCL)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("VAULT_ADDR", srv.Addr)
	t.Setenv("VAULT_TOKEN", tok)
	return srv, p
}

// TestAuditPubkeyWithoutCheckpointNamesTheOrigin: before serve has signed
// its first checkpoint, pubkey cannot read the origin and asks for
// --origin: the message says what an origin is and how serve makes it
// (<deployment>/<node>/audit, --deployment's default custos.local and
// --node's, the host name), so that the operator can give it. It said
// only "pass --origin".
func TestAuditPubkeyWithoutCheckpointNamesTheOrigin(t *testing.T) {
	dir := t.TempDir()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCustos("audit", "pubkey", "--data-dir", dir, "--dev")
	want := "custos.local/" + host + "/audit"
	if code != 2 || stdout != "" || !strings.Contains(stderr, "<deployment>/<node>/audit") || !strings.Contains(stderr, want) {
		t.Errorf("pubkey without a checkpoint: exit %d, stdout %q, stderr %q; want 2 naming <deployment>/<node>/audit and %s", code, stdout, stderr, want)
	}
}
