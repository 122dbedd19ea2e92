package audit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
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
