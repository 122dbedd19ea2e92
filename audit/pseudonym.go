package audit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
)

// PseudonymPrefix starts every keyed hash of an identifier in a record.
const PseudonymPrefix = "hk1-"

// pseudonymDomain separates these keyed hashes from every other use of the
// audit key.
const pseudonymDomain = "custos/audit/patient/v1\x00"

// Pseudonym is the keyed hash under which a patient id appears in audit
// records (in "patients" and in the patient segment of "uris"):
//
//	"hk1-" || hex(HMAC-SHA256(key, "custos/audit/patient/v1\x00" || id)[:16])
//
// key is the audit keyed-hash key; its version is named in the record's
// "keys" field (audit-hmac=...). Without the key the pseudonym reveals
// nothing about the id and cannot be linked to it by guessing; with it an
// auditor computes the lookup value (`custos audit hash ID`). 128 bits keep
// collisions out of reach for any realistic number of patients.
func Pseudonym(key []byte, id string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(pseudonymDomain))
	m.Write([]byte(id))
	sum := m.Sum(nil)
	return PseudonymPrefix + hex.EncodeToString(sum[:16])
}

// PatientRef is one patient a record concerns: its lookup value and the
// tenant of that patient's resources in the record. A lookup value is not
// per tenant (Pseudonym hashes the id alone, and ids are unique within a
// tenant only), so two patients who share an id in two tenants share it:
// only (Tenant, Pseudonym) names one patient. Tenant is "" when none of the
// record's URIs names the patient (an auditor's access record, a
// break-the-glass event): the record does not say which tenant's.
type PatientRef struct {
	Tenant    string
	Pseudonym string
}

// PatientRefs returns the patients r concerns, one PatientRef per lookup
// value of r.Patients and tenant of a URI whose path holds it as a segment
// (SCHEME://TENANT/patients/P/…: URIs keep their tenant, only the patient
// segment is pseudonymized), in the order of r.Patients and then of r.URIs,
// each once; a lookup value no URI names has one PatientRef with Tenant "".
// Pure: it reads the canonical record's fields only.
func PatientRefs(r Record) []PatientRef {
	var out []PatientRef
	for _, p := range r.Patients {
		n := len(out)
		for _, u := range r.URIs {
			if t, ok := URIPatientTenant(u, p); ok && !slices.Contains(out[n:], PatientRef{t, p}) {
				out = append(out, PatientRef{t, p})
			}
		}
		if len(out) == n {
			out = append(out, PatientRef{Pseudonym: p})
		}
	}
	return out
}

// URIPatientTenant returns the tenant (authority) of a record's uri if a
// segment of its path is the lookup value p.
func URIPatientTenant(uri, p string) (string, bool) {
	_, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return "", false
	}
	tenant, path, _ := strings.Cut(rest, "/")
	if tenant == "" || p == "" || !slices.Contains(strings.Split(path, "/"), p) {
		return "", false
	}
	return tenant, true
}
