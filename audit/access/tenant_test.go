package access_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/report"
)

// TestPatientReportIsPerTenant: a patient id is unique within a tenant
// only, and its lookup value (audit.Pseudonym hashes the id alone) is the
// same in every tenant, so patient "p1" of tenant a and "p1" of tenant b
// share it. A patient report over a real log keeps them apart: without a
// tenant, each tenant's rows apart (Row.Tenant, Report.Tenants, a section
// each in the table); with one, that tenant's rows only (and, apart, those
// of records that name the lookup value in no URI); a list page
// naming the lookup value in both is one row per tenant, each showing its
// tenant's resources. Before, every row was one patient's: a's and b's
// accesses merged, and the accounting of disclosures for a's p1 listed
// b's p1's disclosure.
func TestPatientReportIsPerTenant(t *testing.T) {
	l, dir := openLog(t)
	ctx := context.Background()
	key := []byte("0123456789abcdef0123456789abcdef")
	p1, other := audit.Pseudonym(key, "p1"), audit.Pseudonym(key, "p2")
	entry := func(action, sub, purpose string, uris ...string) audit.Entry {
		e := audit.Entry{Action: action, Outcome: audit.OutcomeAllow, Reason: "r", Principal: audit.Principal{Sub: sub}, PurposeOfUse: purpose, URIs: uris}
		for _, u := range uris {
			for _, p := range []string{p1, other} {
				if _, ok := audit.URIPatientTenant(u, p); ok && !slices.Contains(e.Patients, p) {
					e.Patients = append(e.Patients, p)
				}
			}
		}
		return e
	}
	for _, e := range []audit.Entry{
		entry(audit.ActionResourcesRead, "dr-a", "TREAT", "fhir://a/patients/"+p1+"/patient/"+p1),                                               // 1: a's p1
		entry(audit.ActionResourcesRead, "lawyer-b", "HLEGAL", "note://b/patients/"+p1+"/notes/n1"),                                             // 2: b's p1, a disclosure
		entry(audit.ActionResourcesRead, "dr-c", "TREAT", "fhir://c/patients/"+other+"/patient/"+other),                                         // 3: someone else
		entry(audit.ActionResourcesList, "dr-d", "TREAT", "fhir://a/patients/"+p1+"/observation/o1", "fhir://b/patients/"+p1+"/observation/o2"), // 4: both
		entry(audit.ActionResourcesRead, "lawyer-a", "HLEGAL", "fhir://a/patients/"+p1+"/observation/o1"),                                       // 5: a's p1, a disclosure
	} {
		if _, err := l.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	local := access.Local{Service: access.New(l, nil, dir, nil), Caller: alice}
	run := func(q report.Query) report.Report {
		t.Helper()
		var rep report.Report
		_, err := local.Do(ctx, access.OpReport, access.ReportRequest{Ask: access.Ask{Purpose: "PATRQT"}, Query: q, Patients: []string{p1}, Keys: []string{"audit-hmac=dev:file"}},
			func(r io.Reader) error { return json.NewDecoder(r).Decode(&rep) })
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	type row struct {
		Seq       uint64
		Tenant    string
		Resources string
	}
	rows := func(rep report.Report) (out []row) {
		for _, r := range rep.Rows {
			out = append(out, row{r.Seq, r.Tenant, strings.Join(r.Resources, " ")})
		}
		return out
	}
	a1, b2 := row{1, "a", "fhir://a/patients/" + p1 + "/patient/" + p1}, row{2, "b", "note://b/patients/" + p1 + "/notes/n1"}
	a4, b4 := row{4, "a", "fhir://a/patients/" + p1 + "/observation/o1"}, row{4, "b", "fhir://b/patients/" + p1 + "/observation/o2"}
	a5 := row{5, "a", "fhir://a/patients/" + p1 + "/observation/o1"}

	// Record 6 is this report's own access record: it names the lookup
	// value in no URI, so in no tenant.
	all := run(report.Query{})
	if got, want := rows(all), []row{a1, b2, a4, b4, a5, {6, "", ""}}; !slices.Equal(got, want) {
		t.Errorf("without a tenant: rows %+v,\nwant %+v (one row per record and tenant)", got, want)
	}
	if want := []report.TenantRows{{Tenant: "a", Rows: 3}, {Tenant: "b", Rows: 2}, {Tenant: "", Rows: 1}}; !slices.Equal(all.Tenants, want) {
		t.Errorf("tenants %+v, want %+v", all.Tenants, want)
	}
	var table bytes.Buffer
	if err := all.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	// Record 4 is two rows but one record: counted once where records
	// are counted (before, "6 of 6 records match" and dr-d's 2).
	if !strings.Contains(table.String(), "5 of 6 records match (6 rows") || all.ByUser["dr-d"] != 1 || all.ByOut[audit.OutcomeAllow] != 5 {
		t.Errorf("record 4 counted twice: by_user %v, by_outcome %v, table:\n%s", all.ByUser, all.ByOut, table.String())
	}
	ia, ib := strings.Index(table.String(), "\ntenant a: 3 rows\n"), strings.Index(table.String(), "\ntenant b: 2 rows\n")
	if ia < 0 || ib < ia || strings.Contains(table.String()[ia:ib], "lawyer-b") || strings.Contains(table.String()[ib:], "lawyer-a") {
		t.Errorf("the table does not list each tenant's rows apart:\n%s", table.String())
	}

	// With a tenant, records naming the lookup value in no URI (the two
	// reports' access records, 6 and 7) stay, in rows of no tenant: they
	// do not say whose they are.
	if got, want := rows(run(report.Query{Tenant: "b"})), []row{b2, b4, {6, "", ""}, {7, "", ""}}; !slices.Equal(got, want) {
		t.Errorf("tenant b: rows %+v, want %+v", got, want)
	}
	if got, want := rows(run(report.Query{Tenant: "a", Disclosures: true})), []row{a5}; !slices.Equal(got, want) {
		t.Errorf("disclosures of a's p1: rows %+v, want %+v (not b's p1's disclosure, record 2)", got, want)
	}
	if rec := lastRecord(t, l); rec.Reason != "patient="+p1+" tenant=a disclosures" {
		t.Errorf("access record reason %q, want the tenant named", rec.Reason)
	}

	// A tenant needs a patient, and must be a tenant name; nothing is recorded.
	head, _ := l.Head()
	for _, req := range []access.ReportRequest{
		{Ask: access.Ask{Purpose: "PATRQT"}, Query: report.Query{Tenant: "a", Denials: true}},
		{Ask: access.Ask{Purpose: "PATRQT"}, Query: report.Query{Tenant: "A b"}, Patients: []string{p1}},
	} {
		if _, err := local.Do(ctx, access.OpReport, req, access.Discard); !errors.Is(err, access.ErrBadRequest) {
			t.Errorf("report %+v: %v, want ErrBadRequest", req.Query, err)
		}
	}
	if h, _ := l.Head(); h != head {
		t.Errorf("a refused request appended records %d..%d", head+1, h)
	}
}
