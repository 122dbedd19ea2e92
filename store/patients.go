package store

import (
	"cmp"
	"slices"
)

// PatientTenants returns, sorted, the tenants with a current resource
// whose labels name patient (Labels.Patient: the patient id policy
// decisions and break-the-glass grants compare, which is the URI's patient
// segment for custos's own data and the source Patient id for FHIR input).
// None when no current resource names it. It builds the catalog's Index
// (every current resource read once): a question for an operator's
// command ('custos btg grant'), not for the read path, which has its Index.
func (s *Store) PatientTenants(patient string) ([]string, error) {
	if patient == "" {
		return nil, nil
	}
	ix, err := buildIndex(s.entryPage)
	if err != nil {
		return nil, err
	}
	return ix.PatientTenants(patient), nil
}

// SegmentPatient is the patient a URI's patient segment stands for in one
// tenant: the Labels.Patient of the current resources under that segment.
type SegmentPatient struct {
	Tenant, Patient string
}

// SegmentPatients returns, sorted, the patients of the current resources
// whose URI has the patient segment seg (URI.Patient): for custos's own
// data the segment itself, for FHIR input the source Patient id that the
// keyed segment stands for, found from any resource of the compartment,
// not only its Patient resource (which an export may not include). None
// when no current resource is under seg. Like PatientTenants it builds the
// catalog's Index: a question for an operator's command.
func (s *Store) SegmentPatients(seg string) ([]SegmentPatient, error) {
	if seg == "" {
		return nil, nil
	}
	ix, err := buildIndex(s.entryPage)
	if err != nil {
		return nil, err
	}
	return ix.SegmentPatients(seg), nil
}

// PatientTenants returns, sorted, the tenants whose indexed resources name
// patient in their labels.
func (ix *Index) PatientTenants(patient string) []string {
	var out []string
	for t, ps := range ix.sorted {
		if _, ok := slices.BinarySearch(ps, patient); ok {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// SegmentPatients returns, sorted, the (tenant, patient) labels of the
// indexed resources whose URI has the patient segment seg.
func (ix *Index) SegmentPatients(seg string) []SegmentPatient {
	var out []SegmentPatient
	for k, segs := range ix.segs {
		if k.patient != "" && slices.Contains(segs, seg) {
			out = append(out, SegmentPatient{Tenant: k.tenant, Patient: k.patient})
		}
	}
	slices.SortFunc(out, func(a, b SegmentPatient) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Patient, b.Patient))
	})
	return out
}
