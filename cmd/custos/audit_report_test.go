package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/secrets"
)

// TestAuditReportPatientPerTenant runs the real 'custos audit report' on
// a --dev data directory whose log holds reads of patient "p1" of tenant
// a and of "p1" of tenant b (one lookup value, two people): --tenant b
// reports on b's p1 only, without --tenant each tenant's rows are apart
// and named, and --tenant is refused without --patient or when it is no
// tenant name, before anything is recorded. Before, --tenant did not exist
// and the two patients' rows were one list.
func TestAuditReportPatientPerTenant(t *testing.T) {
	dir := t.TempDir()
	k, err := secrets.NewDev()
	if err == nil {
		err = k.PersistIn(dir)
	}
	if err != nil {
		t.Fatal(err)
	}
	h, err := k.AuditKeyHistory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	key := h.Keys()[0]
	p1 := audit.Pseudonym(key.Bytes, "p1")
	path := filepath.Join(dir, "audit.db")
	l := audittest.OpenPath(t, path, audit.Options{Node: "n1"})
	for _, e := range []audit.Entry{
		{Principal: audit.Principal{Sub: "counsel-a"}, URIs: []string{"fhir://a/patients/" + p1 + "/condition/c1"}},
		{Principal: audit.Principal{Sub: "counsel-b"}, URIs: []string{"fhir://b/patients/" + p1 + "/condition/c2"}},
	} {
		e.Action, e.Outcome, e.Reason, e.PurposeOfUse, e.Patients = audit.ActionResourcesRead, audit.OutcomeAllow, "legal_request", "HLEGAL", []string{p1}
		e.Keys = []string{"audit-hmac=" + key.ID}
		if _, err := l.Append(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	custos := func(args ...string) (int, string, string) {
		return runCustos(append([]string{"audit", "report", "--data-dir", dir, "--dev", "--purpose", "PATRQT"}, args...)...)
	}
	users := func(out string) (got []string) {
		var rep struct {
			Rows []struct{ User, Tenant string }
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		for _, r := range rep.Rows {
			got = append(got, r.Tenant+":"+r.User)
		}
		return got
	}
	code, out, errOut := custos("--patient", "p1", "--tenant", "b", "--disclosures", "--json")
	if got := users(out); code != 0 || !slices.Equal(got, []string{"b:counsel-b"}) {
		t.Errorf("--tenant b: exit %d, rows %q, want b:counsel-b only\n%s", code, got, errOut)
	}
	// An accounting of disclosures that finds none (the report's own
	// access records are no disclosures): every list is there, empty
	// (until h-audit7 "tenants" was left out).
	code, out, errOut = custos("--patient", "nobody", "--disclosures", "--json")
	var empty struct {
		Tenants, Rows json.RawMessage
	}
	if err := json.Unmarshal([]byte(out), &empty); code != 0 || err != nil || string(empty.Tenants) != "[]" || string(empty.Rows) != "[]" {
		t.Errorf("no disclosure: exit %d, tenants %s, rows %s, want [] and []\n%s%s", code, empty.Tenants, empty.Rows, out, errOut)
	}
	code, out, errOut = custos("--patient", "p1", "--disclosures")
	ia, ib := strings.Index(out, "\ntenant a: 1 rows\n"), strings.Index(out, "\ntenant b: 1 rows\n")
	if code != 0 || ia < 0 || ib < ia || !strings.Contains(out[ia:ib], "counsel-a") || strings.Contains(out[ia:ib], "counsel-b") ||
		!strings.Contains(out[ib:], "counsel-b") || !strings.Contains(out, "found in 2 tenants (a, b)") {
		t.Errorf("without --tenant: exit %d, want each tenant apart:\n%s%s", code, out, errOut)
	}
	head := func() uint64 {
		l := audittest.OpenPath(t, path, audit.Options{Node: "n1"})
		defer l.Close()
		n, _ := l.Head()
		return n
	}
	before := head()
	for _, args := range [][]string{{"--tenant", "a", "--denials"}, {"--patient", "p1", "--tenant", "General Hospital"}} {
		code, _, errOut := custos(args...)
		if code != 2 || !strings.Contains(errOut, "--tenant") {
			t.Errorf("%q: exit %d, want 2 (usage) naming --tenant: %s", args, code, errOut)
		}
	}
	if after := head(); after != before {
		t.Errorf("refused commands appended records %d..%d", before+1, after)
	}
}
