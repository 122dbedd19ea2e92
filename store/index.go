package store

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// Entry is what the catalog index keeps of one current resource: what a
// policy decides on (URI, labels, MIME type) and what tells the record
// apart from any other version of it (Version, Digest). The rest of the
// record (names, titles, annotations) stays in the file: Get returns it.
type IndexEntry struct {
	URI      string
	MIMEType string
	Version  int
	Digest   string
	Labels   Labels
}

// Index is an immutable in-memory index of one catalog file's current
// resources, built once when Live opens the file (OpenLive, or Reload
// swapping a replaced file in) and never changed: a swap builds a new
// Index for the new file. It answers "which resources of this tenant (or
// of this patient of this tenant) follow this URI" without reading or
// decoding the file.
//
// Invariant (TestIndexAgreesWithPage): for every tenant t and every string
// after, TenantPage(t, after, n) equals the first n of the resources the
// file's Page(after, ...) walk yields whose Labels.Tenant is t, in URI
// order, as Entries; Patients(t) is the sorted set of their
// Labels.Patient; PatientEntries(t, p) those of them whose Labels.Patient
// is p, in URI order. The index is keyed on labels, never on URI segments.
//
// An Index is safe for concurrent use; its methods return copies.
type Index struct {
	entries  []IndexEntry           // every resource, in URI order
	tenants  map[string][]int32     // tenant -> positions in entries, ascending
	patients map[tenantKey][]int32  // (tenant, patient) -> positions, ascending
	schemes  map[tenantKey][]string // (tenant, patient) -> distinct URI schemes, sorted
	segs     map[tenantKey][]string // (tenant, patient) -> distinct URI patient segments
	bySeg    map[tenantKey]string   // (tenant, URI patient segment) -> the one Labels.Patient under it; "" when several
	sorted   map[string][]string    // tenant -> its distinct patients, sorted
	strs     map[string]string      // interned label strings, only while building
}

type tenantKey struct{ tenant, patient string }

// indexPage is how many resources buildIndex reads per read transaction.
const indexPage = 1024

// buildIndex reads every current resource, page by page, with next (the
// entries of up to limit resources after after, in URI order).
func buildIndex(next func(after string, limit int) ([]IndexEntry, error)) (*Index, error) {
	ix := &Index{tenants: map[string][]int32{}, patients: map[tenantKey][]int32{}, schemes: map[tenantKey][]string{}, segs: map[tenantKey][]string{}, bySeg: map[tenantKey]string{}, sorted: map[string][]string{}, strs: map[string]string{}}
	after := ""
	for {
		page, err := next(after, indexPage)
		if err != nil {
			return nil, err
		}
		for i := range page {
			ix.add(&page[i])
		}
		if len(page) < indexPage {
			break
		}
		after = page[len(page)-1].URI
	}
	for k := range ix.patients {
		ix.sorted[k.tenant] = append(ix.sorted[k.tenant], k.patient)
	}
	for t := range ix.sorted {
		slices.Sort(ix.sorted[t])
	}
	ix.strs = nil
	return ix, nil
}

// indexedFields are the fields of a stored resource record the index
// keeps: decoding only them (no names, titles or annotations, no time to
// parse) halves the cost of indexing a catalog.
type indexedFields struct {
	URI      string `json:"uri"`
	MIMEType string `json:"mimeType"`
	Digest   string `json:"etag"`
	Version  int    `json:"version"`
	Labels   Labels `json:"labels"`
}

// entryPage is Page for the index: the entries of up to limit current
// resources whose URI is greater than after, in URI order.
func (s *Store) entryPage(after string, limit int) ([]IndexEntry, error) {
	var out []IndexEntry
	err := s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketResources).Cursor()
		k, v := c.Seek([]byte(after))
		if k != nil && string(k) == after {
			k, v = c.Next()
		}
		for ; k != nil && len(out) < limit; k, v = c.Next() {
			var f indexedFields
			if err := json.Unmarshal(v, &f); err != nil {
				return fmt.Errorf("%w: undecodable resource record", ErrCorrupt)
			}
			out = append(out, IndexEntry{URI: f.URI, MIMEType: f.MIMEType, Version: f.Version, Digest: f.Digest, Labels: f.Labels})
		}
		return nil
	})
	return out, err
}

// resourceEntries adapts a pager of resources to buildIndex.
func resourceEntries(p pager) func(string, int) ([]IndexEntry, error) {
	return func(after string, limit int) ([]IndexEntry, error) {
		rs, err := p.Page(after, limit)
		es := make([]IndexEntry, len(rs))
		for i, r := range rs {
			es[i] = IndexEntry{URI: r.URI, MIMEType: r.MIMEType, Version: r.Version, Digest: r.Digest, Labels: r.Labels}
		}
		return es, err
	}
}

// intern returns one shared copy of s: tenants, types and MIME types repeat
// across the whole catalog.
func (ix *Index) intern(s string) string {
	if v, ok := ix.strs[s]; ok {
		return v
	}
	ix.strs[s] = s
	return s
}

func (ix *Index) add(e *IndexEntry) {
	l := e.Labels
	l.Tenant, l.Patient, l.Type = ix.intern(l.Tenant), ix.intern(l.Patient), ix.intern(l.Type)
	pos := int32(len(ix.entries))
	ix.entries = append(ix.entries, IndexEntry{URI: e.URI, MIMEType: ix.intern(e.MIMEType), Version: e.Version, Digest: e.Digest, Labels: l})
	ix.tenants[l.Tenant] = append(ix.tenants[l.Tenant], pos)
	k := tenantKey{l.Tenant, l.Patient}
	ix.patients[k] = append(ix.patients[k], pos)
	// Resources are added in URI order, and a URI starts with its
	// scheme: one patient's schemes arrive sorted.
	if sc := ix.schemes[k]; len(sc) == 0 || sc[len(sc)-1] != ix.entries[pos].Scheme() {
		ix.schemes[k] = append(sc, ix.intern(ix.entries[pos].Scheme()))
	}
	u, err := ParseURI(e.URI)
	if err != nil || u.Patient == "" {
		return
	}
	if !slices.Contains(ix.segs[k], u.Patient) {
		ix.segs[k] = append(ix.segs[k], u.Patient)
	}
	if l.Patient != "" {
		sk := tenantKey{l.Tenant, u.Patient}
		if p, seen := ix.bySeg[sk]; !seen {
			ix.bySeg[sk] = l.Patient
		} else if p != l.Patient {
			ix.bySeg[sk] = "" // two patients under one segment: it stands for neither
		}
	}
}

// SegmentPatient returns the patient that the URI patient segment seg
// stands for in tenant: the Labels.Patient of the indexed resources of
// tenant whose URI has that segment, whichever of the compartment's
// resources the catalog holds (its Patient resource or not). For custos's
// own data that is seg itself, for FHIR input the source Patient id of
// which seg is the keyed id. False when no resource of tenant with a
// patient label is under seg, or when those under it name more than one
// patient (then seg stands for none of them).
func (ix *Index) SegmentPatient(tenant, seg string) (string, bool) {
	p := ix.bySeg[tenantKey{tenant, seg}]
	return p, p != ""
}

// PatientSegments returns the distinct patient segments of the URIs of the
// entries whose labels name tenant and patient, in the order first seen:
// one for a catalog of one format (the manifest's URI carries the label's
// patient id, FHIR input its keyed id), two where both name the patient.
func (ix *Index) PatientSegments(tenant, patient string) []string {
	return slices.Clone(ix.segs[tenantKey{tenant, patient}])
}

// Len is the number of resources indexed.
func (ix *Index) Len() int { return len(ix.entries) }

// TenantPage returns up to limit entries whose Labels.Tenant is tenant and
// whose URI is strictly greater than after (byte-wise), in URI order; after
// == "" starts at the first. A short page means the end was reached. after
// need not be an indexed URI, so a cursor taken from another catalog stays
// a valid position.
func (ix *Index) TenantPage(tenant, after string, limit int) []IndexEntry {
	pos := ix.tenants[tenant]
	i, _ := slices.BinarySearchFunc(pos, after, func(p int32, t string) int {
		return cmp.Compare(ix.entries[p].URI, t)
	})
	if i < len(pos) && ix.entries[pos[i]].URI == after {
		i++
	}
	out := make([]IndexEntry, 0, min(limit, len(pos)-i))
	for ; i < len(pos) && len(out) < limit; i++ {
		out = append(out, ix.entry(pos[i]))
	}
	return out
}

// TenantLen is the number of resources whose Labels.Tenant is tenant.
func (ix *Index) TenantLen(tenant string) int { return len(ix.tenants[tenant]) }

// Patients returns the distinct Labels.Patient values of tenant's
// resources, sorted.
func (ix *Index) Patients(tenant string) []string { return slices.Clone(ix.sorted[tenant]) }

// Tenants returns the tenants of the indexed entries, sorted.
func (ix *Index) Tenants() []string { return slices.Sorted(maps.Keys(ix.sorted)) }

// PatientEntries returns the entries whose labels name tenant and patient,
// in URI order.
func (ix *Index) PatientEntries(tenant, patient string) []IndexEntry {
	pos := ix.patients[tenantKey{tenant, patient}]
	out := make([]IndexEntry, len(pos))
	for i, p := range pos {
		out[i] = ix.entry(p)
	}
	return out
}

// PatientSchemes returns the distinct schemes of the URIs of the entries
// whose labels name tenant and patient, sorted.
func (ix *Index) PatientSchemes(tenant, patient string) []string {
	return slices.Clone(ix.schemes[tenantKey{tenant, patient}])
}

// entry returns a copy of entries[p] whose label slices are its own.
func (ix *Index) entry(p int32) IndexEntry {
	e := ix.entries[p]
	e.Labels.Sensitivity = slices.Clone(e.Labels.Sensitivity)
	e.Labels.Consent = slices.Clone(e.Labels.Consent)
	return e
}

// Scheme is the scheme of the entry's URI ("fhir", "note", ...).
func (e IndexEntry) Scheme() string {
	s, _, _ := strings.Cut(e.URI, "://")
	return s
}
