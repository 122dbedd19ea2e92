package store

import (
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
