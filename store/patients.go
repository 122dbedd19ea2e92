package store

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// PatientTenants returns, sorted, the tenants with a current resource
// whose labels name patient (Labels.Patient: the patient id policy
// decisions and break-the-glass grants compare, which is the URI's patient
// segment for custos's own data and the source Patient id for FHIR input).
// None when no current resource names it. It reads every current
// resource's labels once: a question for an operator's command ('custos
// btg grant'), not for the read path, which has the Index.
func (s *Store) PatientTenants(patient string) ([]string, error) {
	var tenants []string
	if patient == "" {
		return nil, nil
	}
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketResources).ForEach(func(_, v []byte) error {
			var f struct {
				Labels Labels `json:"labels"`
			}
			if err := json.Unmarshal(v, &f); err != nil {
				return fmt.Errorf("%w: undecodable resource record", ErrCorrupt)
			}
			if f.Labels.Patient == patient && !slices.Contains(tenants, f.Labels.Tenant) {
				tenants = append(tenants, f.Labels.Tenant)
			}
			return nil
		})
	})
	slices.Sort(tenants)
	return tenants, err
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
// when no current resource is under seg. Like PatientTenants it reads
// every current resource once: a question for an operator's command.
func (s *Store) SegmentPatients(seg string) ([]SegmentPatient, error) {
	var out []SegmentPatient
	if seg == "" {
		return nil, nil
	}
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketResources).ForEach(func(k, v []byte) error {
			u, err := ParseURI(string(k))
			if err != nil || u.Patient != seg {
				return nil
			}
			var f struct {
				Labels Labels `json:"labels"`
			}
			if err := json.Unmarshal(v, &f); err != nil {
				return fmt.Errorf("%w: undecodable resource record", ErrCorrupt)
			}
			p := SegmentPatient{Tenant: f.Labels.Tenant, Patient: f.Labels.Patient}
			if p.Patient != "" && !slices.Contains(out, p) {
				out = append(out, p)
			}
			return nil
		})
	})
	slices.SortFunc(out, func(a, b SegmentPatient) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Patient, b.Patient))
	})
	return out, err
}
