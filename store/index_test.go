package store

import (
	"context"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// plainTenantPage is the reference TenantPage: walk the whole catalog with
// Page and keep the tenant's resources.
func plainTenantPage(t *testing.T, p pager, tenant, after string, limit int) []IndexEntry {
	t.Helper()
	out := []IndexEntry{}
	for {
		page, err := p.Page(after, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page {
			if r.Labels.Tenant == tenant && len(out) < limit {
				out = append(out, IndexEntry{URI: r.URI, MIMEType: r.MIMEType, Version: r.Version, Digest: r.Digest, Labels: r.Labels})
			}
		}
		if len(page) < 7 {
			return out
		}
		after = page[len(page)-1].URI
	}
}

// retenant moves entry i of f to tenant (URI and labels alike).
func (f *fixture) retenant(i int, tenant string) {
	f.t.Helper()
	u, err := ParseURI(f.entries[i].URI)
	if err != nil {
		f.t.Fatal(err)
	}
	u.Tenant = tenant
	f.entries[i].URI, f.entries[i].Labels.Tenant = u.String(), tenant
}

// checkIndex compares every answer of ix with the plain walk of p, for
// every tenant of p (and one it does not hold), from every position (every
// URI, and strings between and around them) and several limits.
func checkIndex(t *testing.T, ix *Index, p pager) {
	t.Helper()
	all := plainAll(t, p)
	tenants := map[string]bool{"no-such-tenant": true}
	var positions []string
	for _, r := range all {
		tenants[r.Labels.Tenant] = true
		positions = append(positions, r.URI, r.URI+"\x00", r.URI[:len(r.URI)-1])
	}
	positions = append(positions, "", "a", "zzzz")
	if ix.Len() != len(all) {
		t.Fatalf("index holds %d resources, catalog %d", ix.Len(), len(all))
	}
	// PatientTenants and SegmentPatients ('custos btg grant') against a
	// plain walk: the tenants naming a patient, the labels under a segment.
	tenantsOf, underSeg := map[string][]string{}, map[string][]SegmentPatient{}
	for _, r := range all {
		if !slices.Contains(tenantsOf[r.Labels.Patient], r.Labels.Tenant) {
			tenantsOf[r.Labels.Patient] = append(tenantsOf[r.Labels.Patient], r.Labels.Tenant)
		}
		u, err := ParseURI(r.URI)
		if sp := (SegmentPatient{r.Labels.Tenant, r.Labels.Patient}); err == nil && u.Patient != "" && sp.Patient != "" && !slices.Contains(underSeg[u.Patient], sp) {
			underSeg[u.Patient] = append(underSeg[u.Patient], sp)
		}
	}
	// SegmentPatient (the server's patientOf) against the same walk: the
	// one patient the resources of a tenant under a segment name.
	type tenantSeg struct{ tenant, seg string }
	bySeg := map[tenantSeg][]string{{"no-such-tenant", "no-such-segment"}: nil}
	for _, r := range all {
		if u, err := ParseURI(r.URI); err == nil && u.Patient != "" {
			k := tenantSeg{r.Labels.Tenant, u.Patient}
			if r.Labels.Patient != "" && !slices.Contains(bySeg[k], r.Labels.Patient) {
				bySeg[k] = append(bySeg[k], r.Labels.Patient)
			}
			bySeg[tenantSeg{"no-such-tenant", u.Patient}] = nil
		}
	}
	for k, ps := range bySeg {
		got, ok := ix.SegmentPatient(k.tenant, k.seg)
		if want := len(ps) == 1; ok != want || ok && got != ps[0] {
			t.Fatalf("SegmentPatient(%q, %q) = %q, %v; the resources under it name %q", k.tenant, k.seg, got, ok, ps)
		}
	}
	for patient, want := range mapsWith(tenantsOf, "no-such-patient") {
		slices.Sort(want)
		if got := ix.PatientTenants(patient); !slices.Equal(got, want) {
			t.Fatalf("PatientTenants(%q) = %v, want %v", patient, got, want)
		}
	}
	for seg, want := range mapsWith(underSeg, "no-such-segment") {
		slices.SortFunc(want, func(a, b SegmentPatient) int {
			return strings.Compare(a.Tenant+"\x00"+a.Patient, b.Tenant+"\x00"+b.Patient)
		})
		if got := ix.SegmentPatients(seg); !slices.Equal(got, want) {
			t.Fatalf("SegmentPatients(%q) = %v, want %v", seg, got, want)
		}
	}
	for tenant := range tenants {
		for _, after := range positions {
			for _, limit := range []int{1, 3, 1000} {
				got, want := ix.TenantPage(tenant, after, limit), plainTenantPage(t, p, tenant, after, limit)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("TenantPage(%q, %q, %d):\n got %+v\nwant %+v", tenant, after, limit, got, want)
				}
			}
		}
		every := plainTenantPage(t, p, tenant, "", 1<<30)
		if ix.TenantLen(tenant) != len(every) {
			t.Fatalf("TenantLen(%q) = %d, want %d", tenant, ix.TenantLen(tenant), len(every))
		}
		byPatient := map[string][]IndexEntry{}
		for _, e := range every {
			byPatient[e.Labels.Patient] = append(byPatient[e.Labels.Patient], e)
		}
		var patients []string
		for p := range byPatient {
			patients = append(patients, p)
		}
		slices.Sort(patients)
		if got := ix.Patients(tenant); !slices.Equal(got, patients) {
			t.Fatalf("Patients(%q) = %v, want %v", tenant, got, patients)
		}
		for _, p := range append(patients, "no-such-patient") {
			got, want := ix.PatientEntries(tenant, p), byPatient[p]
			if want == nil {
				want = []IndexEntry{}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("PatientEntries(%q, %q):\n got %+v\nwant %+v", tenant, p, got, want)
			}
			var schemes []string
			for _, e := range want {
				schemes = append(schemes, e.Scheme())
			}
			slices.Sort(schemes)
			if got := ix.PatientSchemes(tenant, p); !slices.Equal(got, slices.Compact(schemes)) {
				t.Fatalf("PatientSchemes(%q, %q) = %v, want %v", tenant, p, got, schemes)
			}
			var segs []string
			for _, e := range want {
				if u, err := ParseURI(e.URI); err == nil && u.Patient != "" && !slices.Contains(segs, u.Patient) {
					segs = append(segs, u.Patient)
				}
			}
			if got := ix.PatientSegments(tenant, p); !slices.Equal(got, segs) {
				t.Fatalf("PatientSegments(%q, %q) = %v, want %v", tenant, p, got, segs)
			}
		}
	}
}

// plainAll is every resource of p, by a plain walk.
func plainAll(t *testing.T, p pager) []Resource {
	t.Helper()
	rs, err := p.Page("", 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// The index a Live builds agrees with a plain walk of the catalog (the
// reference), before and after a swap, and the index taken before the swap
// still describes the old catalog.
func TestIndexAgreesWithPage(t *testing.T) {
	f := newFixture(t)
	f.addN(40)
	for i := range f.entries {
		switch i % 3 {
		case 1:
			f.retenant(i, "other-clinic")
		case 2:
			f.retenant(i, "a-clinic")
		}
	}
	f.writeManifest()
	path := filepath.Join(t.TempDir(), "catalog.db")
	if _, err := ImportStaged(context.Background(), path, f.dir, Options{Timeout: 200 * time.Millisecond}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { checkDB(t, path) })
	l, err := OpenLive(path, LiveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	before, err := l.Index()
	if err != nil {
		t.Fatal(err)
	}
	checkIndex(t, before, l)

	// Replace the catalog: new resources (one in a new tenant), retitled
	// and relabelled ones.
	snapshot := plainAll(t, l)
	f.addN(5)
	f.retenant(len(f.entries)-1, "new-clinic")
	f.entries[3].Title = "Retitled"
	f.entries[4].Labels.Sensitivity = []string{"vip"}
	f.writeManifest()
	if _, err := ImportStaged(context.Background(), path, f.dir, Options{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, swapped, err := l.Reload(); err != nil || !swapped {
		t.Fatalf("reload: swapped=%v err=%v", swapped, err)
	}
	after, err := l.Index()
	if err != nil {
		t.Fatal(err)
	}
	if after == before {
		t.Fatal("the swap kept the old index")
	}
	checkIndex(t, after, l)
	if after.TenantLen("new-clinic") != 1 {
		t.Fatalf("new tenant: %d resources", after.TenantLen("new-clinic"))
	}
	// The old index is unchanged: it still holds what the old catalog held.
	if got := before.TenantPage("", "", 1<<30); len(got) != 0 {
		t.Fatalf("old index answers for tenant \"\": %v", got)
	}
	var old []IndexEntry
	for _, tenant := range []string{"a-clinic", "general-hospital", "other-clinic"} {
		old = append(old, before.TenantPage(tenant, "", 1<<30)...)
	}
	if len(old) != len(snapshot) {
		t.Fatalf("old index holds %d resources, the old catalog %d", len(old), len(snapshot))
	}

	l.Close()
	if _, err := l.Index(); err != ErrClosed {
		t.Fatalf("Index after Close: %v", err)
	}
}

// The index is keyed on labels: resources without a patient (tenant-level
// resources) are indexed under the patient "" of their tenant.
func TestIndexTenantLevelResources(t *testing.T) {
	rs := pages{
		{URI: "fhir://t1/organization/1", Version: 1, Labels: Labels{Tenant: "t1", Type: "organization"}},
		{URI: "fhir://t1/patients/p/patient/2", Version: 1, Labels: Labels{Tenant: "t1", Patient: "p", Type: "patient"}},
		{URI: "fhir://t2/organization/3", Version: 2, Labels: Labels{Tenant: "t2", Type: "organization"}},
	}
	ix, err := buildIndex(resourceEntries(rs))
	if err != nil {
		t.Fatal(err)
	}
	checkIndex(t, ix, rs)
	if got := ix.Patients("t1"); !slices.Equal(got, []string{"", "p"}) {
		t.Fatalf("patients of t1: %v", got)
	}
}

// mapsWith returns m with key absent mapped to nil (a question whose
// answer is none).
func mapsWith[V any](m map[string][]V, absent string) map[string][]V {
	out := maps.Clone(m)
	out[absent] = nil
	return out
}

// SegmentPatient names the patient a URI's patient segment stands for from
// any resource of the compartment, with or without its Patient resource;
// a segment under which resources name two patients stands for none, and
// a segment is per tenant.
func TestIndexSegmentPatient(t *testing.T) {
	const (
		seg1 = "0b5c1f7e-3c2a-8d7e-9f10-2a3b4c5d6e7f" // a compartment without a Patient resource
		seg2 = "cdcc52c3-6174-81ea-a7eb-916734a3d4fb" // one whose resources name two patients
		id   = "d6a7732f-601b-8415-a2eb-2931f7dbc838"
	)
	obs := func(tenant, seg, n string) string {
		return "fhir://" + tenant + "/patients/" + seg + "/observation/" + id[:len(id)-1] + n
	}
	rs := pages{ // in URI order
		{URI: obs("t1", seg1, "1"), Version: 1, Labels: Labels{Tenant: "t1", Patient: "MRN-1", Type: "observation"}},
		{URI: obs("t1", seg1, "2"), Version: 1, Labels: Labels{Tenant: "t1", Patient: "MRN-1", Type: "observation"}},
		{URI: obs("t1", seg2, "3"), Version: 1, Labels: Labels{Tenant: "t1", Patient: "MRN-2", Type: "observation"}},
		{URI: obs("t1", seg2, "4"), Version: 1, Labels: Labels{Tenant: "t1", Patient: "MRN-3", Type: "observation"}},
		{URI: obs("t2", seg1, "6"), Version: 1, Labels: Labels{Tenant: "t2", Type: "observation"}},
		{URI: obs("t2", seg2, "5"), Version: 1, Labels: Labels{Tenant: "t2", Patient: "MRN-2", Type: "observation"}},
	}
	ix, err := buildIndex(resourceEntries(rs))
	if err != nil {
		t.Fatal(err)
	}
	checkIndex(t, ix, rs)
	for _, c := range []struct {
		tenant, seg, want string
		ok                bool
	}{
		{"t1", seg1, "MRN-1", true},
		{"t1", seg2, "", false},
		{"t2", seg2, "MRN-2", true},
		{"t2", seg1, "", false}, // its one resource has no patient label
		{"t3", seg1, "", false},
	} {
		if got, ok := ix.SegmentPatient(c.tenant, c.seg); got != c.want || ok != c.ok {
			t.Errorf("SegmentPatient(%s, %s) = %q, %v; want %q, %v", c.tenant, c.seg, got, ok, c.want, c.ok)
		}
	}
}
