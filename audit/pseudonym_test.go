package audit

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// TestPseudonymGolden pins the keyed hash: HMAC-SHA256 over the domain and
// the id, first 16 bytes, hex (recomputable with openssl, see
// docs/audit-format.md).
func TestPseudonymGolden(t *testing.T) {
	key := bytes.Repeat([]byte{0x42}, 32)
	const id = "0b5c1f7e-3c2a-4d7e-9f10-2a3b4c5d6e7f"
	got := Pseudonym(key, id)
	const want = "hk1-"
	if !strings.HasPrefix(got, want) || len(got) != len(want)+32 {
		t.Fatalf("Pseudonym = %q", got)
	}
	if got != pseudonymGolden {
		t.Fatalf("Pseudonym = %q, want the pinned %q", got, pseudonymGolden)
	}
	if Pseudonym(key, id+"0") == got || Pseudonym(bytes.Repeat([]byte{0x43}, 32), id) == got {
		t.Fatal("pseudonym does not depend on both key and id")
	}
	if strings.Contains(got, id[:8]) {
		t.Fatal("pseudonym contains the id")
	}
}

// pseudonymGolden was computed independently with
//
//	printf 'custos/audit/patient/v1\x00%s' ID | openssl dgst -sha256 -mac HMAC -macopt hexkey:4242…42
//
// and the first 32 hex digits.
const pseudonymGolden = "hk1-e553fdb0f4c0a60badbbf42e8ef69660"

// TestPatientRefs: a record's patients are named by lookup value and the
// tenant of the URIs that hold it as a path segment; one lookup value in
// two tenants is two PatientRefs, one no URI names has tenant "".
func TestPatientRefs(t *testing.T) {
	const p, q, r = "hk1-00000000000000000000000000000001", "hk1-00000000000000000000000000000002", "hk1-00000000000000000000000000000003"
	rec := Record{Entry: Entry{Patients: []string{p, q, r}, URIs: []string{
		"fhir://a/patients/" + p + "/patient/" + p, "note://b/patients/" + p + "/notes/n1", "fhir://a/patients/" + p + "/observation/o1",
		"fhir://c/patients/" + q + "x/patient/" + q + "x", "invalid",
	}}}
	want := []PatientRef{{"a", p}, {"b", p}, {"", q}, {"", r}}
	if got := PatientRefs(rec); !slices.Equal(got, want) {
		t.Errorf("PatientRefs = %+v, want %+v", got, want)
	}
}
