package minimize

import (
	"strings"
	"testing"
)

// TestScrubURLsAndIPs: Safe Harbor's classes 14 and 15. URLs, with a
// scheme or "www.", and IPv4 and IPv6 addresses were released whole by
// every scrub until h-scrub4. A URL that names a definition (a public
// terminology's system, HL7's and the W3C's URLs, a FHIR canonical or
// identifier system) is kept.
func TestScrubURLsAndIPs(t *testing.T) {
	checkScrub(t, []scrubCase{
		{"see https://portal.example.org/patient/12345?id=abc.", "see [URL]."},
		{"results at https://mychart.example-health.org/MyChart/Visit/88213 (log in)", "results at [URL] (log in)"},
		{"blog: http://evelyn-marsh.example.net/", "blog: [URL]"},
		{"www.janedoe-family.com", "[URL]"},
		{"visit WWW.EXAMPLE.COM/p/88, then", "visit [URL], then"},
		{"ftp://files.example.org/scan.pdf", "[URL]"},
		{"https://ehr.example.org/fhir/Patient/p3", "[URL]"},
		{"login from 192.168.14.27", "login from [IP]"},
		{"host 10.0.0.7:53122", "host [IP]:53122"},
		{"IP 203.0.113.7.", "IP [IP]."},
		{"addr 2001:db8:85a3:0:0:8a2e:370:7334", "addr [IP]"},
		{"addr 2001:db8::1 and fe80::1ff:fe23:4567:890a", "addr [IP] and [IP]"},
		{"::1", "[IP]"},
	})
	checkKept(t, []string{
		"http://loinc.org", "http://snomed.info/sct", "http://hl7.org/fhir/sid/icd-10-cm",
		"http://terminology.hl7.org/CodeSystem/v3-ActCode",
		`<div xmlns="http://www.w3.org/1999/xhtml">Anastrozole 1 mg tablet once daily</div>`,
		"http://example.org/fhir/StructureDefinition/intake-note",
		"http://fhir.de/CodeSystem/bfarm/icd-10-gm", "http://fhir.de/sid/gkv/kvid-10", "https://fhir.nhs.uk/Id/nhs-number",
		"OID 1.2.840.113619.2.55", "version 1.2.3", "v10.0.19041.1", "08:30:00", "at 08:30, 12:45:10",
		"std::vector", "a::b", "ratio 1:2:3",
	})
}

// TestScrubKeywordIdentifiers: Safe Harbor's classes 9 to 13 as clinical
// and billing text writes them, a number after the word that names it, in
// English, German, French, Dutch, Spanish and Italian; every scrub
// released them until h-scrub4 (but for the KVNR, NIR, Medicare and OHIP
// numbers whose check agreed). The word stays, the number goes.
func TestScrubKeywordIdentifiers(t *testing.T) {
	checkScrub(t, []scrubCase{
		// 9, 10: account and health plan numbers.
		{"Acct 12345678", "Acct [ID]"},
		{"Acct#: 00A-778812", "Acct#: [ID]"},
		{"account no. 4471-0092", "account no. [ID]"},
		{"member ID: XYZ123456789", "member ID: [ID]"},
		{"Coverage of Quillon Bexworth, member MBR88112233", "Coverage of Quillon Bexworth, member [ID]"},
		{"EOB for Quillon Bexworth, claim CLM5566778899", "EOB for Quillon Bexworth, claim [ID]"},
		{"policy # P12345-01", "policy # [ID]"},
		{"Policy number: 99812-AB", "Policy number: [ID]"},
		{"group # 4455667", "group # [ID]"},
		{"Group No. G-2231", "Group No. [ID]"},
		{"health plan ID 88001234", "health plan ID [ID]"},
		{"IHI: 8003608166690503,", "IHI: [ID],"},
		{"Klinikum Fichtelgebirge, KVNR K482917365", "Klinikum Fichtelgebirge, KVNR [ID]"},
		{"Medicare 6951 44967 7)", "Medicare [ID])"},
		{"Versichertennummer: 1234567890", "Versichertennummer: [ID]"},
		{"Versichertennummer K482917365, Kühnapfel", "Versichertennummer [ID], Kühnapfel"},
		{"Mitgliedsnummer 7712-3", "Mitgliedsnummer [ID]"},
		{"n° de sécurité sociale 1 84 12 76 451 089 47", "n° de sécurité sociale [ID]"},
		{"numéro de sécurité sociale: 284127645108911", "numéro de sécurité sociale: [ID]"},
		{"INS 2 55 08 29195 025 38, 7 impasse", "INS [ID], 7 impasse"},
		{"AVS 756.9217.0769.85, Dorfstrasse 14", "AVS [ID], Dorfstrasse 14"},
		{"verzekeringsnummer 123456789", "verzekeringsnummer [ID]"},
		{"polisnummer: ZK-889912", "polisnummer: [ID]"},
		{"NSS 281234567840", "NSS [ID]"},
		{"número de afiliación 28/12345678/40", "número de afiliación [ID]"},
		{"DNI 54362315-K", "DNI [ID]"},
		{"NIE X1234567L", "NIE [ID]"},
		{"codice fiscale RSSMRA85T10A562S", "codice fiscale [ID]"},
		{"tessera sanitaria 80380800301234567890", "tessera sanitaria [ID]"},
		// 11: certificate and licence numbers.
		{"DL# D1234567", "DL# [ID]"},
		{"DL: S530-4432-9981", "DL: [ID]"},
		{"driver's license 123456789", "driver's license [ID]"},
		{"driver's licence no. AB123456C", "driver's licence no. [ID]"},
		{"licence no. 4471182", "licence no. [ID]"},
		{"certificate # 2024-88123", "certificate # [ID]"},
		{"Führerscheinnummer B072RRE2I55", "Führerscheinnummer [ID]"},
		{"permis de conduire 12AB34567", "permis de conduire [ID]"},
		{"rijbewijsnummer 5012345678", "rijbewijsnummer [ID]"},
		{"patente di guida U1X23Y456Z", "patente di guida [ID]"},
		// 12: vehicle identifiers.
		{"VIN 1G4AH59H45G118341", "VIN [ID]"},
		{"VIN: WVWZZZ1JZXW000001", "VIN: [ID]"},
		{"car 1G4AH59H45G118341 towed", "car [ID] towed"},
		{"licence plate ABC 1234", "licence plate [ID]"},
		{"plate: B-AB 1234", "plate: [ID]"},
		{"Kennzeichen M-XY 123", "Kennzeichen [ID]"},
		{"kenteken 12-ABC-3", "kenteken [ID]"},
		{"immatriculation AB-123-CD", "immatriculation [ID]"},
		{"matrícula 1234 BCD", "matrícula [ID]"},
		// 13: device identifiers and serial numbers.
		{"serial no. 12345ABC", "serial no. [ID]"},
		{"Serial number: PM-4471-22A", "Serial number: [ID]"},
		{"SN: X1234567", "SN: [ID]"},
		{"S/N 88123-77", "S/N [ID]"},
		{"pacemaker UDI (01)00844588003288(17)141120(10)7654321D(21)10987654d321", "pacemaker UDI [ID]"},
		{"(01)09504000059118(17)271120(10)LOT-8842177(21)SN-88231177", "[ID]"},
		{"IMEI 490154203237518", "IMEI [ID]"},
		{"Seriennummer 4471-8823", "Seriennummer [ID]"},
		{"numéro de série 88A-1234", "numéro de série [ID]"},
	})
}

// TestScrubCheckedIdentifiers: a VIN, a Spanish DNI or NIE and an
// Italian codice fiscale carry their own check, and are replaced without
// a keyword when it agrees (49 CFR 565.15(c)'s example VIN, python-stdnum's
// DNI, python-codicefiscale's codice fiscale); one character changed,
// they are kept.
func TestScrubCheckedIdentifiers(t *testing.T) {
	checkScrub(t, []scrubCase{
		{"1G4AH59H45G118341", "[ID]"},
		{"1M8GDM9AXKP042788", "[ID]"},
		{"54362315K", "[ID]"},
		{"54362315-K", "[ID]"},
		{"X1234567L", "[ID]"},
		{"CCCFBA85D03L219P", "[ID]"},
		{"RSSMRA85T10A562S", "[ID]"},
	})
	checkKept(t, []string{"1G4AH59H55G118341", "12345678901234567", "54362315Z", "X1234567M", "CCCFBA85D03L219Q", "RSSMRA85T10A562T"})
}

// TestScrubSafeHarborKeepsClinicalText: the new classes leave clinical
// text as it was: doses, lab values and ranges, codes of LOINC, SNOMED
// CT, ICD, RxNorm and NDC, times, blood pressures, versions, lot numbers
// (docs/policy.md: a lot names a batch, not a person), and the words the
// keywords share with clinical prose.
func TestScrubSafeHarborKeepsClinicalText(t *testing.T) {
	checkKept(t, []string{
		"5 mg/kg", "Metformin 500 mg BID", "glucose 110 mg/dL 2024", "HbA1c 7.4% (goal < 7%)", "K 3.5-5.1 mmol/L",
		"BP 120/80", "BP 128/82, HR 76", "LOINC 8302-2", "SNOMED 38341003", "ICD-10 E11.9", "RxNorm 197361",
		"NDC 0002-3227-01", "NDC 0781-1506-10", "lot 0781-1506-10", "Lot: 7654321D", "at 08:30", "08:30:00",
		"version 1.2.3", "v2.5.1", "age group 65-74", "blood group A", "Group B strep", "Plan: recheck A1c in 3 months",
		"Plan 2 tablets daily", "taking into account 3 days", "family member 2 visited", "member of staff",
		"blood agar plate 3", "growth plate", "plate 1234 incubated", "serial dilutions 1:10", "serial 3 measurements",
		"policy 2", "group 12 of 20", "DL 5", "mg/dL 120", "insurance card scanned", "device 1",
		"ECG 12-lead", "Gleason 3+4=7", "T2N0M0", "G6PD", "BRCA1", "CYP2D6*4", "COVID-19",
		"1,000,000 IU", "HGVS NM_000546.6:c.215C>G",
	})
}

// TestScrubNewClassesByName: a scrub obligation names the classes url and
// id as it names the others; a class not named is not replaced.
func TestScrubNewClassesByName(t *testing.T) {
	in := "see https://portal.example.org/p/1 from 10.0.0.7, Acct 12345678, call 555-123-4567"
	for fn, want := range map[string]string{
		"url":       "see [URL] from [IP], Acct 12345678, call 555-123-4567",
		"id":        "see https://portal.example.org/p/1 from 10.0.0.7, Acct [ID], call 555-123-4567",
		"phone":     "see https://portal.example.org/p/1 from 10.0.0.7, Acct 12345678, call [PHONE]",
		"url,id":    "see [URL] from [IP], Acct [ID], call 555-123-4567",
		"":          "see [URL] from [IP], Acct [ID], call [PHONE]",
		"url,phone": "see [URL] from [IP], Acct 12345678, call [PHONE]",
	} {
		out, err := Text([]byte(in), []Obligation{{Op: OpScrub, Fn: fn}}, Options{})
		if err != nil || string(out) != want {
			t.Errorf("scrub %q = %q, %v; want %q", fn, out, err, want)
		}
	}
	if !strings.Contains(ScrubString(in), "[URL]") {
		t.Errorf("ScrubString(%q) keeps the URL", in)
	}
}
