package minimize

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// refNow is the reference instant used by the tests: a patient born
// 1934-05-01 is 92, one born 1986-02-10 is 40.
var refNow = time.Date(2026, time.November, 21, 15, 4, 5, 0, time.UTC)

// canon decodes and re-encodes a JSON literal so expectations can be written
// readably; it fails the test on invalid JSON.
func canon(t testing.TB, s string) string {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("bad JSON in test: %v\n%s", err, s)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const opsDoc = `{
  "a/b": 1, "m~n": 2, "*": {"k": 1},
  "name": [{"family": "Doe", "given": ["Jane", "Q"]}],
  "telecom": [{"system": "phone", "value": "555-123-4567"}, {"system": "email", "value": "j@x.org"}],
  "address": [{"city": "Cambridge", "postalCode": "02139"}, {"city": "Ashland", "postalCode": "03601-1234"}],
  "arr": [0, 1, 2, 3],
  "obj": {"x": {"y": 1}}
}`

func TestJSONOps(t *testing.T) {
	tests := []struct {
		name string
		obs  []Obligation
		want string // expected document (any formatting)
	}{
		{"no obligations", nil, opsDoc},
		{"remove member", []Obligation{{Op: OpRemove, Path: "/name"}},
			strings.Replace(opsDoc, `"name": [{"family": "Doe", "given": ["Jane", "Q"]}],`, "", 1)},
		{"remove wildcard member", []Obligation{{Op: OpRemove, Path: "/telecom/*/value"}},
			strings.NewReplacer(`, "value": "555-123-4567"`, "", `, "value": "j@x.org"`, "").Replace(opsDoc)},
		{"remove ~1 escape", []Obligation{{Op: OpRemove, Path: "/a~1b"}},
			strings.Replace(opsDoc, `"a/b": 1, `, "", 1)},
		{"remove ~0 escape", []Obligation{{Op: OpRemove, Path: "/m~0n"}},
			strings.Replace(opsDoc, `"m~n": 2, `, "", 1)},
		{"remove missing member", []Obligation{{Op: OpRemove, Path: "/photo"}}, opsDoc},
		{"remove missing nested", []Obligation{{Op: OpRemove, Path: "/photo/0/data"}}, opsDoc},
		{"remove index out of range", []Obligation{{Op: OpRemove, Path: "/arr/4"}}, opsDoc},
		{"remove index dash", []Obligation{{Op: OpRemove, Path: "/arr/-"}}, opsDoc},
		{"remove index leading zero", []Obligation{{Op: OpRemove, Path: "/arr/01"}}, opsDoc},
		{"remove through scalar", []Obligation{{Op: OpRemove, Path: "/obj/x/y/z"}}, opsDoc},
		{"remove wildcard on object is literal", []Obligation{{Op: OpRemove, Path: "/*/k"}},
			strings.Replace(opsDoc, `{"k": 1}`, `{}`, 1)},
		{"remove array element", []Obligation{{Op: OpRemove, Path: "/arr/1"}},
			strings.Replace(opsDoc, `[0, 1, 2, 3]`, `[0, 2, 3]`, 1)},
		{"remove all array elements", []Obligation{{Op: OpRemove, Path: "/arr/*"}},
			strings.Replace(opsDoc, `[0, 1, 2, 3]`, `[]`, 1)},
		{"remove nested wildcard", []Obligation{{Op: OpRemove, Path: "/name/*/given/*"}},
			strings.Replace(opsDoc, `["Jane", "Q"]`, `[]`, 1)},
		{"remove deep member", []Obligation{{Op: OpRemove, Path: "/obj/x/y"}},
			strings.Replace(opsDoc, `{"x": {"y": 1}}`, `{"x": {}}`, 1)},
		{"remove in order", []Obligation{{Op: OpRemove, Path: "/arr/0"}, {Op: OpRemove, Path: "/arr/0"}},
			strings.Replace(opsDoc, `[0, 1, 2, 3]`, `[2, 3]`, 1)},
		{"mask full", []Obligation{{Op: OpMask, Path: "/name/0/family"}},
			strings.Replace(opsDoc, `"Doe"`, `"***"`, 1)},
		{"mask last4 wildcard", []Obligation{{Op: OpMask, Path: "/telecom/*/value", Fn: "last4"}},
			strings.NewReplacer(`"555-123-4567"`, `"***4567"`, `"j@x.org"`, `"***.org"`).Replace(opsDoc)},
		{"mask last4 short", []Obligation{{Op: OpMask, Path: "/name/0/given/*", Fn: "last4"}},
			strings.Replace(opsDoc, `["Jane", "Q"]`, `["***", "***"]`, 1)},
		{"mask number", []Obligation{{Op: OpMask, Path: "/arr/2", Fn: "last4"}},
			strings.Replace(opsDoc, `[0, 1, 2, 3]`, `[0, 1, "***", 3]`, 1)},
		{"mask object", []Obligation{{Op: OpMask, Path: "/obj"}},
			strings.Replace(opsDoc, `{"x": {"y": 1}}`, `"***"`, 1)},
		{"mask whole document", []Obligation{{Op: OpMask, Path: ""}}, `"***"`},
		{"mask missing", []Obligation{{Op: OpMask, Path: "/telecom/2/value"}}, opsDoc},
		{"generalize zip3 wildcard", []Obligation{{Op: OpGeneralize, Path: "/address/*/postalCode", Fn: "zip3"}},
			strings.NewReplacer(`"02139"`, `"021"`, `"03601-1234"`, `"000"`).Replace(opsDoc)},
		{"scrub object recursively", []Obligation{{Op: OpScrub, Path: "/telecom"}},
			strings.NewReplacer(`"555-123-4567"`, `"[PHONE]"`, `"j@x.org"`, `"[EMAIL]"`).Replace(opsDoc)},
		{"scrub class subset", []Obligation{{Op: OpScrub, Path: "/telecom", Fn: "email"}},
			strings.NewReplacer(`"j@x.org"`, `"[EMAIL]"`).Replace(opsDoc)},
		{"mask then remove parent", []Obligation{{Op: OpMask, Path: "/obj/x"}, {Op: OpRemove, Path: "/obj"}},
			`{"a/b": 1, "m~n": 2, "*": {"k": 1},
			  "name": [{"family": "Doe", "given": ["Jane", "Q"]}],
			  "telecom": [{"system": "phone", "value": "555-123-4567"}, {"system": "email", "value": "j@x.org"}],
			  "address": [{"city": "Cambridge", "postalCode": "02139"}, {"city": "Ashland", "postalCode": "03601-1234"}],
			  "arr": [0, 1, 2, 3]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := JSON([]byte(opsDoc), tt.obs, Options{})
			if err != nil {
				t.Fatalf("JSON: %v", err)
			}
			if want := canon(t, tt.want); string(got) != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}

func TestJSONDeterministicEncoding(t *testing.T) {
	in := `{ "z": 1, "a": [ {"y": 12345678901234567890.000000001, "b": "<tag> & \u00e9"} ], "m": null, "t": true }` + "\n"
	want := `{"a":[{"b":"<tag> & é","y":12345678901234567890.000000001}],"m":null,"t":true,"z":1}`
	got, err := JSON([]byte(in), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestGeneralize(t *testing.T) {
	tests := []struct {
		fn, in, want string // in and want are JSON values
	}{
		{"year", `"2024"`, `"2024"`},
		{"year", `"2024-03"`, `"2024"`},
		{"year", `"2024-03-05"`, `"2024"`},
		{"year", `"2024-03-05T10:00:00Z"`, `"2024"`},
		{"year", `"2024-03-05T10:00:00.123+05:30"`, `"2024"`},
		{"year", `"2024-03-05T23:59:60-08:00"`, `"2024"`},
		{"year", `"2024-13-01"`, `"***"`},
		{"year", `"2024-03-05T25:00:00Z"`, `"***"`},
		{"year", `"March 5, 2024"`, `"***"`},
		{"year", `"24"`, `"***"`},
		{"year", `" 2024"`, `"***"`},
		{"year", `2024`, `"***"`},
		{"year", `null`, `"***"`},
		{"year", `{"start": "2024-03-05"}`, `"***"`},

		{"zip3", `"02139"`, `"021"`},
		{"zip3", `"02139-4307"`, `"021"`},
		{"zip3", `"021"`, `"021"`},
		{"zip3", `"03601"`, `"000"`},
		{"zip3", `"89301-0001"`, `"000"`},
		{"zip3", `"036"`, `"000"`},
		{"zip3", `"2139"`, `"***"`},
		{"zip3", `"02139 "`, `"***"`},
		{"zip3", `"021394307"`, `"***"`},
		{"zip3", `"K1A 0B1"`, `"***"`},
		{"zip3", `2139`, `"***"`},

		{"age90", `92`, `"90+"`},
		{"age90", `90`, `"90+"`},
		{"age90", `89`, `89`},
		{"age90", `89.5`, `"90+"`},
		{"age90", `1e2`, `"90+"`},
		{"age90", `40`, `40`},
		{"age90", `"92"`, `"90+"`},
		{"age90", `"45"`, `"45"`},
		{"age90", `"90+"`, `"90+"`},
		{"age90", `-3`, `"***"`},
		{"age90", `"ninety"`, `"***"`},
		{"age90", `"NaN"`, `"***"`},
		{"age90", `true`, `"***"`},
		{"age90", `{"value": 92, "unit": "a"}`, `"***"`},

		{"birthyear90", `"1934-05-01"`, `"90+"`},  // 92 at refNow
		{"birthyear90", `"1986-02-10"`, `"1986"`}, // 40 at refNow
		{"birthyear90", `"1936-11-21"`, `"90+"`},  // 90th birthday is refNow's date
		{"birthyear90", `"1936-11-22"`, `"1936"`}, // 89 until tomorrow
		{"birthyear90", `"1936"`, `"90+"`},        // year only: earliest day, could be 90
		{"birthyear90", `"1937"`, `"1937"`},
		{"birthyear90", `"1936-12"`, `"1936"`},
		{"birthyear90", `"1936-11"`, `"90+"`},
		{"birthyear90", `"1936-11-21T23:00:00-05:00"`, `"90+"`},
		{"birthyear90", `"90+"`, `"90+"`},
		{"birthyear90", `"11/21/1936"`, `"***"`},
		{"birthyear90", `19361121`, `"***"`},
	}
	for _, tt := range tests {
		t.Run(tt.fn+"/"+tt.in, func(t *testing.T) {
			doc := `{"v":` + tt.in + `}`
			obs := []Obligation{{Op: OpGeneralize, Path: "/v", Fn: tt.fn}}
			got, err := JSON([]byte(doc), obs, Options{Now: refNow})
			if err != nil {
				t.Fatalf("JSON: %v", err)
			}
			if want := canon(t, `{"v":`+tt.want+`}`); string(got) != want {
				t.Errorf("got %s, want %s", got, want)
			}
		})
	}
}

func TestRestrictedZIP3(t *testing.T) {
	want := []string{"036", "059", "063", "102", "202", "203", "204", "205", "369", "556", "692", "753",
		"772", "790", "821", "823", "830", "831", "878", "879", "884", "890", "893"}
	got := RestrictedZIP3()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("RestrictedZIP3() = %v, want %v", got, want)
	}
	got[0] = "999" // a copy: must not change the package's list
	if RestrictedZIP3()[0] != "036" {
		t.Fatal("RestrictedZIP3 returned the package's own storage")
	}
	for _, z := range want {
		doc := `{"zip":"` + z + `45"}`
		out, err := JSON([]byte(doc), []Obligation{{Op: OpGeneralize, Path: "/zip", Fn: "zip3"}}, Options{})
		if err != nil || string(out) != `{"zip":"000"}` {
			t.Errorf("zip %s45: got %s, %v; want 000", z, out, err)
		}
	}
	// Neighbours of restricted prefixes are released as their ZIP3.
	for _, z := range []string{"035", "037", "060", "822", "892"} {
		out, err := JSON([]byte(`{"zip":"`+z+`01"}`), []Obligation{{Op: OpGeneralize, Path: "/zip", Fn: "zip3"}}, Options{})
		if err != nil || string(out) != `{"zip":"`+z+`"}` {
			t.Errorf("zip %s01: got %s, %v", z, out, err)
		}
	}
}

// TestRestrictedZIP3BothCensuses: every prefix of either census's table
// of three-digit ZCTAs of 20,000 people or fewer is released as "000"
// (restrictedZIP3): HHS's 17 of the 2000 Census, and the 18 of the 2010
// Census, of which 202, 204, 369, 753 and 772 were released as their
// digits until h-deid11. A populated prefix beside them is still
// released.
func TestRestrictedZIP3BothCensuses(t *testing.T) {
	tables := map[string][]string{
		"2000": {"036", "059", "063", "102", "203", "556", "692", "790", "821",
			"823", "830", "831", "878", "879", "884", "890", "893"},
		"2010": {"036", "059", "102", "202", "203", "204", "205", "369", "556",
			"692", "753", "772", "821", "823", "878", "879", "884", "893"},
	}
	zip3 := []Obligation{{Op: OpGeneralize, Path: "/zip", Fn: GeneralizeZIP3}}
	for census, prefixes := range tables {
		for _, z := range prefixes {
			for _, zip := range []string{z + "01", z + "99-1234", z} {
				out, err := JSON([]byte(`{"zip":"`+zip+`"}`), zip3, Options{})
				if err != nil || string(out) != `{"zip":"000"}` {
					t.Errorf("%s Census, zip %s: got %s, %v; want 000", census, zip, out, err)
				}
			}
		}
	}
	for _, zip := range []string{"75201", "77002", "20001", "37201", "20601"} {
		out, err := JSON([]byte(`{"zip":"`+zip+`"}`), zip3, Options{})
		if want := `{"zip":"` + zip[:3] + `"}`; err != nil || string(out) != want {
			t.Errorf("populated zip %s: got %s, %v; want %s", zip, out, err, want)
		}
	}
}

// TestZIP3WithoutPopulation: a ZIP3 whose ZIP codes hold no resident
// population (military post offices, federal agencies, the IRS, prefixes
// never assigned) holds 20,000 people or fewer and becomes "000", as a
// restricted ZIP3 does; a populated one is kept. generalize:zip3 and the
// deidentify walk's address share the rule. Until 2026-12-06 only HHS's 17
// restricted ZIP3s became "000": 090 (APO/FPO Europe) and 205 (federal
// agencies) were released.
func TestZIP3WithoutPopulation(t *testing.T) {
	for zip, want := range map[string]string{
		"10001": "100", // Manhattan
		"60614": "606", // Chicago
		"00601": "006", // Adjuntas, Puerto Rico
		"99501": "995", // Anchorage
		"03601": "000", // restricted (HHS, 2000 census)
		"09012": "000", // APO/FPO Europe (AE)
		"09801": "000", // AE
		"09901": "000", // AE, never assigned
		"34002": "000", // APO/FPO Americas (AA)
		"96201": "000", // APO/FPO Pacific (AP)
		"96601": "000", // AP
		"20500": "000", // the White House
		"20515": "000", // the House of Representatives
		"00501": "000", // the IRS, Holtsville NY
		"05501": "000", // the IRS, Andover MA
		"73301": "000", // the IRS, Austin TX (released until h-review25)
		"73344": "000", // the IRS, Austin TX
		"75201": "752", // Dallas
		"77002": "770", // Houston
		"78701": "787", // Austin
		"00012": "000", // never assigned
		"00401": "000", // never assigned
	} {
		out, err := JSON([]byte(`{"zip":"`+zip+`"}`), []Obligation{{Op: OpGeneralize, Path: "/zip", Fn: "zip3"}}, Options{})
		if err != nil || string(out) != `{"zip":"`+want+`"}` {
			t.Errorf("generalize:zip3 of %s: got %s, %v; want %s", zip, out, err, want)
		}
		doc := `{"resourceType":"Patient","address":[{"postalCode":"` + zip + `","country":"US"}]}`
		out, err = JSON([]byte(doc), []Obligation{{Op: OpDeidentify, Fn: DeidentifySafeHarbor}}, Options{Now: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)})
		if wantDoc := `{"address":[{"country":"US","postalCode":"` + want + `"}],"resourceType":"Patient"}`; err != nil || string(out) != wantDoc {
			t.Errorf("deidentify of postal code %s: got %s, %v; want %s", zip, out, err, wantDoc)
		}
	}
}

func TestScrubString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"call 555-123-4567 today", "call [PHONE] today"},
		{"(555) 123-4567", "[PHONE]"},
		{"(555)123-4567", "[PHONE]"},
		{"+1 555 123 4567", "[PHONE]"},
		{"1-555-123-4567", "[PHONE]"},
		{"555.123.4567", "[PHONE]"},
		{"5551234567", "[PHONE]"},
		{"tel:555-123-4567,555-123-4568", "tel:[PHONE],[PHONE]"},
		{"Phone555-123-4567", "Phone[PHONE]"},
		{"jane.doe+test@mail.example.org", "[EMAIL]"},
		{"<jane_doe@example.org>", "<[EMAIL]>"},
		{"SSN 123-45-6789.", "SSN [SSN]."},
		{"123 45 6789", "[SSN]"},
		{"SSN: 123456789", "[SSN]"},
		{"MRN-12345678", "[MRN]"},
		{"MRN: 12345678", "[MRN]"},
		{"MRN 12345678", "[MRN]"},
		{"mrn#12345678", "[MRN]"},
		{"Medical Record Number: 00123456", "[MRN]"},
		{"(MRN-00123456)", "([MRN])"},
		{"2024-03-05", "[DATE]"},
		{"2024-03-05T10:00:00Z", "[DATE]"},
		{"03/05/2024", "[DATE]"},
		{"3/5/24", "[DATE]"},
		{"03-05-2024", "[DATE]"},
		{"March 5, 2024", "[DATE]"},
		{"Sept. 5, 2024", "[DATE]"},
		{"5 March 2024", "[DATE]"},
		{"1st of March 2024", "[DATE]"},
		{"seen March 2024", "seen [DATE]"},
		{"on March 5th.", "on [DATE]."},
		{"on 5 march", "on [DATE]"},
		// Dates and telephone numbers as outside data writes them (IPS's
		// national editions, HL7 v2 displays, European narratives): not
		// replaced until h-outside.
		{"geb. 14.03.1931", "geb. [DATE]"},
		{"am 14.03.31 und 1931.03.14.", "am [DATE] und [DATE]."},
		{"14.3.31", "14.3.31"}, // a two-digit year needs a two-digit day and month
		{"DOB 14-Mar-1931", "DOB [DATE]"},
		{"14.Mär.1931", "[DATE]"},
		{"14/JAN/31", "[DATE]"},
		{"Mar-14-1931", "[DATE]"},
		{"14. März 1931", "[DATE]"},
		{"né le 14 janv. 1931", "né le [DATE]"},
		{"5 de mayo de 2024", "[DATE]"},
		{"Tel. +49 30 1234567", "Tel. [PHONE]"},
		{"+49 (0)30 1234567", "[PHONE]"},
		{"call +44 20 7946 0958.", "call [PHONE]."},
		{"+33 1 23 45 67 89", "[PHONE]"},
		{"+61 2 9876 5432", "[PHONE]"},
		// Telephone numbers as their countries write them, without "+"
		// and a country code (the UK, Germany, France, Australia, Japan,
		// the Netherlands), and dates of eight digits without separators
		// (YYYYMMDD, as HL7 v2 writes them, also with a time; DDMMYYYY,
		// MMDDYYYY): released by every scrub until h-scrub3.
		{"call 020 7946 0958.", "call [PHONE]."},
		{"mobile 07700 900123", "mobile [PHONE]"},
		{"0161 496 0000", "[PHONE]"},
		{"07700900123", "[PHONE]"},
		{"Tel. 030 1234567", "Tel. [PHONE]"},
		{"(030) 123 456 78", "[PHONE]"},
		{"0171 1234567", "[PHONE]"},
		{"089 12345678", "[PHONE]"},
		{"030 123 456 78", "[PHONE]"},
		{"tél. 01 23 45 67 89", "tél. [PHONE]"},
		{"06.12.34.56.78", "[PHONE]"},
		{"06-12-34-56-78", "[PHONE]"},
		{"(02) 9876 5432", "[PHONE]"},
		{"0412 345 678", "[PHONE]"},
		{"02 9876 5432", "[PHONE]"},
		{"電話 03-1234-5678", "電話 [PHONE]"},
		{"090-1234-5678", "[PHONE]"},
		{"020-1234567", "[PHONE]"},
		{"06-12345678", "[PHONE]"},
		// Germany's area code and number joined by "/" (DIN 5008 before
		// 2011, still common): released until h-review58.
		{"Tel. 030/1234567", "Tel. [PHONE]"},
		{"0711/1234567", "[PHONE]"},
		{"Praxis 089 / 123 45 67, Fax 089/12345678", "Praxis [PHONE], Fax [PHONE]"},
		{"Tel.: 020 7946 0958, Fax: 020 7946 0959", "Tel.: [PHONE], Fax: [PHONE]"},
		{"DOB 19310314", "DOB [DATE]"},
		{"geb. 14031931,", "geb. [DATE],"},
		{"03141931", "[DATE]"},
		{"20240315", "[DATE]"},
		{"OBX|1|TS|||19310314083000", "OBX|1|TS|||[DATE]"},
		{"PID-7 193103140830", "PID-7 [DATE]"},
		// HL7 v2 DTM with fractional seconds (YYYYMMDDHHMMSS.S to .SSSS)
		// and an offset: released whole until h-review58.
		{"OBX|1|TS|||19310314083000.0000-0500", "OBX|1|TS|||[DATE]-0500"},
		{"MSH-7 19310314083000.5", "MSH-7 [DATE]"},
		{"id19310314", "id[DATE]"},
		{"19310314.", "[DATE]."},
		{"20240229", "[DATE]"},
		// Clinical content that is not an identifier survives.
		{"temp 38.5, pH 7.35, version 1.2.3", "temp 38.5, pH 7.35, version 1.2.3"},
		{"OID 1.2.36.1.2001", "OID 1.2.36.1.2001"},
		{"set 10 units, out 5 days, +2 edema", "set 10 units, out 5 days, +2 edema"},
		{"BP 120/80, HR 72", "BP 120/80, HR 72"},
		{"metformin 500 mg BID x 3 months", "metformin 500 mg BID x 3 months"},
		{"A1c 7.2%, LDL 130", "A1c 7.2%, LDL 130"},
		{"ZIP 02139", "ZIP 02139"},
		{"Summary: stable", "Summary: stable"},
		{"", ""},
		// Beside a machine token (see TestScrubReasonKeepsMachineTokens)
		// or a short hex run: scrubbed.
		{"abcdef5551234567 555-123-4567", "abcdef[PHONE] [PHONE]"},
		{"ABCDEF5551234567,5551234568", "ABCDEF[PHONE],[PHONE]"},
		{"grant f9711cdd-ad47-4631-a555-123456789012 by jane@example.org", "grant f9711cdd-ad47-4631-a555-123456789012 by [EMAIL]"},
		// Not machine tokens: a run glued to other letters, one of digits
		// alone, mixed case, short, one after an identifier's label.
		{"Phone5551234567abcdef", "Phone[PHONE]abcdef"},
		{"x5551234567abcdef0123", "x[PHONE]abcdef0123"},
		{"5551234567 1234567890123456", "[PHONE] 1234567890123456"},
		{"Ab5551234567cdef", "Ab[PHONE]cdef"},
		{"ab5551234567cd", "ab[PHONE]cd"},
		{"MRN: 0123abcdef0123456789abcdef", "[MRN]abcdef[PHONE]abcdef"},
		{"jane0123456789abcdef0123@example.org", "[EMAIL]"},
		{"SSN: 123456789abcdef0123456", "[SSN]abcdef0123456"},
	}
	for _, tt := range tests {
		if got := ScrubString(tt.in); got != tt.want {
			t.Errorf("ScrubString(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := ScrubReason(tt.in); got != tt.want {
			t.Errorf("ScrubReason(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestScrubReasonKeepsMachineTokens: ScrubReason, for custos's own audit
// reasons, keeps a machine token's digits (a policy rejection's candidate
// digest held ten digits between letters and became
// "sha256:…a[PHONE]ad42ef"); ScrubString keeps no token whole, since in a
// title or a payload a telephone number may be written in a token's shape
// (until h-scrub2 it kept them too, and released
// "aaaaaaaa-2024-0305-1234-5551234567ab" whole). The identifiers beside a
// token are scrubbed by both.
func TestScrubReasonKeepsMachineTokens(t *testing.T) {
	tests := []struct{ in, strict, reason string }{
		{"(candidate sha256:ff3f7df62860253b46be590f5d959f6f5a2b8725df92705a3916944033ad42ef)",
			"(candidate sha256:ff3f7df62860253b46be590f5d959f6f5a2b8725df92705a[PHONE]ad42ef)",
			"(candidate sha256:ff3f7df62860253b46be590f5d959f6f5a2b8725df92705a3916944033ad42ef)"},
		{"call 555-123-4567 sha256:ff3f7df62860253b46be590f5d959f6f5a2b8725df92705a3916944033ad42ef 555-123-4568, 2024-03-05",
			"call [PHONE] sha256:ff3f7df62860253b46be590f5d959f6f5a2b8725df92705a[PHONE]ad42ef [PHONE], [DATE]",
			"call [PHONE] sha256:ff3f7df62860253b46be590f5d959f6f5a2b8725df92705a3916944033ad42ef [PHONE], [DATE]"},
		{"fhir://h/hk1-0f5551234567aa0123456789abcdef01/Observation/12-05-2024",
			"fhir://h/hk1-0f[PHONE]aa[PHONE]abcdef01/Observation/[DATE]",
			"fhir://h/hk1-0f5551234567aa0123456789abcdef01/Observation/[DATE]"},
		{"hk1-0f5551234567aa0123456789abcdef01", "hk1-0f[PHONE]aa[PHONE]abcdef01", "hk1-0f5551234567aa0123456789abcdef01"},
		// A keyed id whose hex begins with ten digits: "1-" + ten digits is a
		// telephone number with its country code, starting in "hk1-", outside
		// the hex run (until h-review56: "hk[PHONE]abcdef…" under ScrubReason).
		{"hk1-0123456789abcdef0123456789abcdef", "hk[PHONE]abcdef[PHONE]abcdef", "hk1-0123456789abcdef0123456789abcdef"},
		{"fhir://h/hk1-5551234567aa0123456789abcdef0123/Observation/1", "fhir://h/hk[PHONE]aa[PHONE]abcdef0123/Observation/1",
			"fhir://h/hk1-5551234567aa0123456789abcdef0123/Observation/1"},
		{"FF3F7DF62860253B46BE590F5D959F6F5A2B8725DF92705A3916944033AD42EF",
			"FF3F7DF62860253B46BE590F5D959F6F5A2B8725DF92705A[PHONE]AD42EF",
			"FF3F7DF62860253B46BE590F5D959F6F5A2B8725DF92705A3916944033AD42EF"},
		{"aaaaaaaa-2024-0305-1234-5551234567ab", "aaaaaaaa-2024-0305-1234-[PHONE]ab", "aaaaaaaa-2024-0305-1234-5551234567ab"},
		{"5551234567abcdef5551234567abcdef", "[PHONE]abcdef[PHONE]abcdef", "5551234567abcdef5551234567abcdef"},
		{"aaaaaaaa-2024-0305-1234-5551234567ab 555-123-4567", "aaaaaaaa-2024-0305-1234-[PHONE]ab [PHONE]", "aaaaaaaa-2024-0305-1234-5551234567ab [PHONE]"},
	}
	for _, tt := range tests {
		if got := ScrubString(tt.in); got != tt.strict {
			t.Errorf("ScrubString(%q) = %q, want %q", tt.in, got, tt.strict)
		}
		if got := ScrubReason(tt.in); got != tt.reason {
			t.Errorf("ScrubReason(%q) = %q, want %q", tt.in, got, tt.reason)
		}
	}
}

// TestScrubKeepsNoPhoneInAShortHexRun: a telephone number written beside a
// few hex letters, as a 16-character hex run, was kept whole as a "machine
// token" after h-audit13 where the scrub had always replaced it; only a
// run of a digest's or keyed id's length (32 or more) is kept, and only by
// ScrubReason.
func TestScrubKeepsNoPhoneInAShortHexRun(t *testing.T) {
	tests := []struct{ in, want string }{
		{"call 5551234567abcdef now", "call [PHONE]abcdef now"},
		{"call abcdef5551234567 now", "call abcdef[PHONE] now"},
		{"abcd1234567890ab", "abcd[PHONE]ab"},
		{"ref/5551234567abcdef", "ref/[PHONE]abcdef"},
		{"ref:abcdef5551234567", "ref:abcdef[PHONE]"},
		{"#ABCDEF5551234567", "#ABCDEF[PHONE]"},
		{"see abcdef5551234567abcdef5551234 ok", "see abcdef[PHONE]abcdef5551234 ok"},
		// A keyed id (32 hex) and a digest (64) keep their digits under
		// ScrubReason: TestScrubReasonKeepsMachineTokens.
	}
	for _, tt := range tests {
		if got := ScrubReason(tt.in); got != tt.want {
			t.Errorf("ScrubReason(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := ScrubString(tt.in); got != tt.want {
			t.Errorf("ScrubString(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestScrubObligationKeepsNoPhoneInAMachineToken: the scrub obligation, on
// a text document and on JSON strings, keeps no machine token whole: a
// telephone number written in a UUID's or a digest's shape was released
// whole after h-audit13.
func TestScrubObligationKeepsNoPhoneInAMachineToken(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"aaaaaaaa-2024-0305-1234-5551234567ab", "aaaaaaaa-2024-0305-1234-[PHONE]ab"},
		{"5551234567abcdef5551234567abcdef", "[PHONE]abcdef[PHONE]abcdef"},
		{"call aaaaaaaa-2024-0305-1234-5551234567ab now", "call aaaaaaaa-2024-0305-1234-[PHONE]ab now"},
		{"ref 5551234567ABCDEF5551234567ABCDEF.", "ref [PHONE]ABCDEF[PHONE]ABCDEF."},
		{"sha256:ff3f7df62860253b46be590f5d959f6f5a2b8725df92705a3916944033ad42ef", "sha256:ff3f7df62860253b46be590f5d959f6f5a2b8725df92705a[PHONE]ad42ef"},
	} {
		out, err := Text([]byte(tt.in), []Obligation{{Op: OpScrub}}, Options{})
		if err != nil || string(out) != tt.want {
			t.Errorf("Text scrub of %q = %q, %v; want %q", tt.in, out, err, tt.want)
		}
		out, err = JSON([]byte(`{"note":["`+tt.in+`"]}`), []Obligation{{Op: OpScrub, Path: "/note", Fn: "phone"}}, Options{})
		if want := `{"note":["` + tt.want + `"]}`; err != nil || string(out) != want {
			t.Errorf("JSON scrub:/note:phone of %q = %s, %v; want %s", tt.in, out, err, want)
		}
	}
}

// prefilterCases are dates with a month's name or with dots, written as
// the scrub patterns read them (folded, spaced, ordinal, with "of" and
// "de"), and strings that come close to one without being one.
var prefilterCases = []string{
	"March 5, 2024", "5 March 2024", "March 2024", "March 5", "5 March", "5th of March", "5th   of   March.",
	"seen 5 Mar.", "MARCH 5TH", "ſept 5, 2024", "5 ſept", "5 oct", "Oct. 5", "DEC 2024",
	"14-Mar-1931", "14.Mär.1931", "14/JAN/31", "Mar-14-1931", "14. März 1931", "14 janv. 1931",
	"5 de mayo de 2024", "5 DE MAYO, DE 2024", "14-MRT-1931", "31 déc. 2024", "31 DÉC 2024", "1 sty 2024",
	"Email 5 x", "PROGRESS 5", "may return in 2 weeks", "2 days ago.", "set 10", "out 5", "marzo",
	"Marché 5", "5 Mayé", "ámar-14-2024", "xMar 5", "Mar5", "5Mar", "5 in March", "5 mg in March",
	"14.03.1931", "14.03.31", "1931.03.14", "1.5.2024", "1.5.20", "pH 7.35.", "3.5.10", "ver. 12.03.2020",
	"1.2.36.1.2001", "7.4%", "12.5", "a.1.b", "1..2", "\xff14-mar-2024", "14-mar-\xff2024",
	// National telephone numbers and compact dates (h-scrub3), and
	// near misses: a 0 after a digit, 00, a run of 7, 9, 12 or 14 digits.
	"020 7946 0958", "(030) 123 456 78", "(02) 9876 5432", "06.12.34.56.78", "03-1234-5678", "020-1234567",
	"x0412 345 678", "(0)", "0", "01", "10 7946 0958", "00 7946 0958", "(00) 9876 5432", "0.5",
	"(01)12 34", "(01) 12 34", "(0123) 12 34 56 78", "(0123)-12345678", "0123 123 123 12", "555-0142", "T09:40", "01 2345",
	"(0123) 12.34.56", "0412 345 6789 0123", "030/1234567", "089 / 123 45 67", "0711/123", "01/2024", "010/100000", "03/14/2024", "030/123/4567", "030//1234567", "01/234567", "0301/234567", "01-23-45-67-8", "0 1 2 3 4 5 6",
	"19310314", "14031931", "19310314083000", "193103140830", "1931031408", "1931031", "193103145", "x19310314y",
	"1.19310314", "19310314.5", "19310314.", "19310314083000.0000-0500", "19310314083000.12345", "193103140830.5", "\xff19310314", "0\xff1", "12345678",
	// Numbers after "00", with the trunk prefix as "(0)" or apart, and
	// with unicodeSpaces between groups (h-intl), and near misses: an NDC
	// code, times, a national number too short, a space cut in its bytes.
	"0049 30 1234567", "0044 20 7946 0958", "0033 1 23 45 67 89", "0039 06 1234 5678", "0049 (0)30 1234567", "001 212 555 0100",
	"0044\u00a020\u00a07946\u00a00958", "0049\u202f(0)30\u202f1234567", "(0)20 7946 0958", "(0)20\u20097946\u20090958", "0 20 7946 0958",
	"0\u00a020\u00a07946\u00a00958", "020\u20077946\u20070958", "01\u202f23\u202f45\u202f67\u202f89", "(030)\u00a0123\u00a0456\u00a078",
	"00781 1506 10", "00591 123 45 30", "0030 1200 1800", "0049 30 12345", "0049 301 23", "0044\xc2 20 7946 0958", "0044\xe2\x80 20 7946",
	"0\u00a0\u00a0\u00a0\u00a0\u00a0\u00a0\u00a0\u00a0\u00a0\u00a0\u00a0\u00a0\u00a0\u00a0\u00a0\u00a0\u00a0\u00a01 23 45 67 89",
	// National identifiers (h-intl), and near misses: eight digits, a
	// lower-case letter, a space cut in its bytes, a run broken by one.
	"A000500015", "1 84 12 76 451 089 46", "186022A21532523", "2123\u00a045670\u00a01", "1234-567-897-AB", "111222333", "1112.22.333",
	"12345678", "a123456780", "1234\xe2\x80 567 897", "1234 567\u2028897", "11122233,3", "2A 21 532 523 ABC",
	"1 86 02 2A 215 325 23", "2123  45670 1", "1234\u00a0\u00a0567 897", "2026-03-05T09:40:00", "1 8B 12 2B 451 089 46", "C-000500021",
}

// Each pattern's prefilter is false only where its plain regexp (the
// reference) finds nothing, and scrubbing with or without it gives the
// same result, ScrubReason's too; the table holds dates each prefilter
// must let through.
func TestScrubPrefiltersAgree(t *testing.T) {
	for _, s := range prefilterCases {
		checkPrefilters(t, s)
	}
	for _, s := range []string{"March 5", "14.Mär.1931", "ſept 5, 2024", "5th   of   March.", "14.03.31", "5 de mayo de 2024",
		"020 7946 0958", "(02) 9876 5432", "19310314", "19310314083000"} {
		if ScrubString(s) == s {
			t.Errorf("%q was not scrubbed", s)
		}
	}
}

// checkPrefilters fails t if a prefilter of scrubPatterns is false for s
// where its pattern's regexp matches s, or scrubbing s with the
// prefilters differs from scrubbing it without them.
func checkPrefilters(t *testing.T, s string) {
	t.Helper()
	plain := slices.Clone(scrubPatterns)
	for i := range plain {
		p := &plain[i]
		if p.may != nil && !p.may(s) && p.re.MatchString(s) {
			t.Errorf("pattern %d (%s): the prefilter refuses %q, where the regexp matches %q", i, p.token, s, p.re.FindString(s))
		}
		p.may = nil
	}
	if got, want := ScrubString(s), scrubWith(plain, s, allClasses, false); got != want {
		t.Errorf("ScrubString(%q) = %q with the prefilters, %q without", s, got, want)
	}
	if got, want := ScrubReason(s), scrubWith(plain, s, allClasses, true); got != want {
		t.Errorf("ScrubReason(%q) = %q with the prefilters, %q without", s, got, want)
	}
}

func TestScrubClassesAndOrder(t *testing.T) {
	const in = "SSN 123-45-6789, phone 555-123-4567, MRN-12345678, jane@example.org, 2024-03-05"
	tests := []struct{ fn, want string }{
		{"", "SSN [SSN], phone [PHONE], [MRN], [EMAIL], [DATE]"},
		{"phone", "SSN 123-45-6789, phone [PHONE], MRN-12345678, jane@example.org, 2024-03-05"},
		{"ssn", "SSN [SSN], phone 555-123-4567, MRN-12345678, jane@example.org, 2024-03-05"},
		{"email,date", "SSN 123-45-6789, phone 555-123-4567, MRN-12345678, [EMAIL], [DATE]"},
		{"mrn", "SSN 123-45-6789, phone 555-123-4567, [MRN], jane@example.org, 2024-03-05"},
	}
	for _, tt := range tests {
		got, err := Text([]byte(in), []Obligation{{Op: OpScrub, Fn: tt.fn}}, Options{})
		if err != nil {
			t.Fatalf("fn %q: %v", tt.fn, err)
		}
		if string(got) != tt.want {
			t.Errorf("fn %q:\n got %q\nwant %q", tt.fn, got, tt.want)
		}
	}
}

// clinicalNote is a synthetic progress note that mentions every identifier
// class in several formats.
const clinicalNote = `PROGRESS NOTE  2026-03-05T09:40:00-05:00
Patient: Jane Q. Doe   DOB: 02/10/1986   MRN-00123456   (outside MRN: 98765432)
Seen March 5, 2026 for follow-up of type 2 diabetes; last visit 5 December 2025 (12/5/25).
Contact: cell (617) 555-0142, home 617-555-0199, daughter +1 617 555 0175, fax 617.555.0123.
Email jane.doe@example.org; portal alias jdoe_1986@patients.example-health.org.
SSN 123-45-6789 verified for billing. Insurance card scanned 2026-02-28.
Vitals: BP 128/82, HR 76, A1c 7.4% (goal < 7%). Metformin 500 mg BID, continue.
Plan: recheck A1c in 3 months; return on Jun 4, 2026 or call 6175550111 with questions.
`

func TestTextScrubClinicalNote(t *testing.T) {
	out, err := Apply("text/plain; charset=utf-8", []byte(clinicalNote), []Obligation{{Op: OpScrub}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ident := range []string{
		"2026-03-05", "09:40", "02/10/1986", "00123456", "98765432", "March 5", "5 December 2025", "12/5/25",
		"(617) 555-0142", "555-0142", "617-555-0199", "617 555 0175", "617.555.0123", "6175550111",
		"jane.doe@example.org", "jdoe_1986", "example-health", "123-45-6789", "6789", "2026-02-28", "Jun 4",
		"617", "555",
	} {
		if bytes.Contains(out, []byte(ident)) {
			t.Errorf("scrubbed note still contains %q:\n%s", ident, out)
		}
	}
	// No identifier pattern of any class matches anywhere in the output.
	for _, p := range scrubPatterns {
		if p.replace(string(out), false) != string(out) {
			t.Errorf("%s pattern still finds an identifier in %q", p.token, out)
		}
	}
	// Clinical content survives.
	for _, keep := range []string{"BP 128/82", "HR 76", "A1c 7.4%", "Metformin 500 mg BID", "in 3 months", "type 2 diabetes"} {
		if !bytes.Contains(out, []byte(keep)) {
			t.Errorf("scrubbed note lost %q:\n%s", keep, out)
		}
	}
	for tok, n := range map[string]int{"[PHONE]": 5, "[EMAIL]": 2, "[SSN]": 1, "[MRN]": 2, "[DATE]": 7} {
		if got := bytes.Count(out, []byte(tok)); got != n {
			t.Errorf("%s appears %d times, want %d:\n%s", tok, got, n, out)
		}
	}
}

func TestText(t *testing.T) {
	in := []byte("call 555-123-4567")
	out, err := Text(in, nil, Options{})
	if err != nil || string(out) != string(in) {
		t.Fatalf("Text(no obligations) = %q, %v", out, err)
	}
	out[0] = 'X'
	if in[0] != 'c' {
		t.Fatal("Text output aliases its input")
	}
	// Invalid UTF-8 outside identifiers is preserved byte for byte.
	out, err = Text([]byte("\xff 555-123-4567 \xfe"), []Obligation{{Op: OpScrub}}, Options{})
	if err != nil || string(out) != "\xff [PHONE] \xfe" {
		t.Fatalf("got %q, %v", out, err)
	}
	for _, ob := range []Obligation{
		{Op: OpRemove, Path: "/x"},
		{Op: OpMask, Path: ""},
		{Op: OpGeneralize, Path: "", Fn: "year"},
		{Op: OpScrub, Path: "/text"},
	} {
		out, err := Text(in, []Obligation{{Op: OpScrub}, ob}, Options{})
		if !errors.Is(err, ErrNotApplicable) || out != nil {
			t.Errorf("Text with %s = %q, %v; want nil, ErrNotApplicable", ob, out, err)
		}
	}
	if out, err := Text(in, []Obligation{{Op: "erase"}}, Options{}); !errors.Is(err, ErrUnknownOp) || out != nil {
		t.Errorf("Text with unknown op = %q, %v", out, err)
	}
}

// IsBinary is the rule Apply dispatches on: JSON and text are minimized,
// everything else (unknown and unparsable types included) is binary.
func TestIsBinary(t *testing.T) {
	for mt, want := range map[string]bool{
		"application/json": false, "application/fhir+json; fhirVersion=4.0": false, "Application/JSON": false,
		"text/plain": false, "text/markdown; charset=utf-8": false,
		"image/png": true, "application/pdf": true, "application/octet-stream": true,
		"": true, "not a mime type": true, "text": true, "fhir+json": true,
	} {
		if got := IsBinary(mt); got != want {
			t.Errorf("IsBinary(%q) = %v, want %v", mt, got, want)
		}
		// Apply agrees: an obligation on a binary type is withheld.
		_, err := Apply(mt, []byte("{}"), []Obligation{{Op: OpScrub}}, Options{})
		if errors.Is(err, ErrBinaryWithheld) != want {
			t.Errorf("Apply(%q) with an obligation: %v; IsBinary %v", mt, err, want)
		}
	}
}

func TestApplyDispatch(t *testing.T) {
	jsonDoc := []byte(`{"b":"555-123-4567","a":1}`)
	scrubAll := []Obligation{{Op: OpScrub}}
	tests := []struct {
		mime    string
		payload []byte
		obs     []Obligation
		want    string
		wantErr error
	}{
		{"application/json", jsonDoc, scrubAll, `{"a":1,"b":"[PHONE]"}`, nil},
		{"application/fhir+json; fhirVersion=4.0", jsonDoc, scrubAll, `{"a":1,"b":"[PHONE]"}`, nil},
		{"Application/JSON; charset=UTF-8", jsonDoc, nil, `{"a":1,"b":"555-123-4567"}`, nil},
		{"application/ld+json", jsonDoc, []Obligation{{Op: OpRemove, Path: "/b"}}, `{"a":1}`, nil},
		{"text/plain", jsonDoc, scrubAll, `{"b":"[PHONE]","a":1}`, nil},
		{"text/markdown; charset=utf-8", []byte("# 3/5/24"), scrubAll, `# [DATE]`, nil},
		{"text/plain", jsonDoc, []Obligation{{Op: OpRemove, Path: "/b"}}, "", ErrNotApplicable},
		{"application/pdf", []byte("%PDF-1.7 binary"), nil, "%PDF-1.7 binary", nil},
		{"image/png", []byte("\x89PNG\r\n"), nil, "\x89PNG\r\n", nil},
		{"application/pdf", []byte("%PDF-1.7"), scrubAll, "", ErrBinaryWithheld},
		{"image/png", []byte("\x89PNG"), []Obligation{{Op: OpRemove, Path: "/x"}}, "", ErrBinaryWithheld},
		{"image/png", []byte("\x89PNG"), []Obligation{{Op: "zap", Path: "/x"}}, "", ErrUnknownOp},
		{"", []byte("{}"), scrubAll, "", ErrBinaryWithheld},                // unknown type is binary
		{"not a mime type", []byte("{}"), scrubAll, "", ErrBinaryWithheld}, // unparsable type is binary
		{"application/octet-stream", []byte("{}"), nil, "{}", nil},
		{"application/json", []byte(`{"a":`), nil, "", ErrMalformed},
		{"application/json", []byte(`{} {}`), nil, "", ErrMalformed},
		{"application/json", []byte(`{}]`), nil, "", ErrMalformed},
		{"application/json", []byte(``), nil, "", ErrMalformed},
		{"application/json", []byte("{\"a\":\"\xff\"}"), nil, "", ErrMalformed},
		{"application/json", []byte(`{"a":1}`), []Obligation{{Op: OpRemove, Path: ""}}, "", ErrBadPath},
		{"application/json", []byte(`{"a":1}`), []Obligation{{Op: OpGeneralize, Path: "/missing", Fn: "birthyear90"}}, "", ErrNoReferenceTime},
		{"application/json", []byte(`{"a":1}`), []Obligation{{Op: OpScrub, Fn: "names"}}, "", ErrBadFn},
	}
	for _, tt := range tests {
		t.Run(tt.mime, func(t *testing.T) {
			if tt.wantErr == ErrBinaryWithheld && !IsBinary(tt.mime) {
				t.Errorf("Apply withholds %q as binary but IsBinary says it is not", tt.mime)
			}
			got, err := Apply(tt.mime, tt.payload, tt.obs, Options{})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || got != nil {
					t.Fatalf("Apply = %q, %v; want nil, %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("Apply = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestApplyDoesNotAliasOrMutate(t *testing.T) {
	bin := []byte("%PDF-1.7")
	out, err := Apply("application/pdf", bin, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out[0] = 'X'
	if bin[0] != '%' {
		t.Error("binary output aliases input")
	}
	doc := []byte(`{"name":"Doe","telecom":[{"value":"555-123-4567"}]}`)
	orig := string(doc)
	if _, err := Apply("application/json", doc, deidObligations, Options{Now: refNow}); err != nil {
		t.Fatal(err)
	}
	if string(doc) != orig {
		t.Error("Apply modified its input")
	}
}

func TestErrorsCarryNoPayload(t *testing.T) {
	const secret = "123-45-6789"
	payloads := [][]byte{
		[]byte(`{"ssn":"` + secret + `"`),
		[]byte(`{"ssn":"` + secret + `"} trailing ` + secret),
		[]byte(`["` + secret + `", ` + secret + `]`),
	}
	for _, p := range payloads {
		_, err := JSON(p, []Obligation{{Op: OpRemove, Path: "/ssn"}}, Options{})
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("JSON(%q) error = %v, want ErrMalformed", p, err)
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "6789") {
			t.Errorf("error leaks payload: %v", err)
		}
	}
	_, err := Apply("application/pdf", []byte(secret), []Obligation{{Op: OpScrub}}, Options{})
	if !errors.Is(err, ErrBinaryWithheld) || strings.Contains(err.Error(), secret) {
		t.Errorf("binary error = %v", err)
	}
}

// clinicalNegatives are numbers of clinical writing that the national
// telephone and compact date patterns must leave alone: doses, counts and
// lab values written with a space for thousands, ranges, blood pressure,
// LOINC, SNOMED CT (eight digits: 38341003 hypertension, 44054006 type 2
// diabetes, 22298006 myocardial infarction, 73211009 diabetes mellitus),
// RxNorm, ICD-10, CPT, CVX and NDC codes (4-4-2, 5-3-2, 5-4-2 with a
// labeler beginning with 0), OIDs, versions, times, years, durations, US
// ZIP codes (also ZIP+4), timestamps already read as dates, and eight
// digits that are no date (the year out of 1800-2099, month 13, day 32,
// 30 February).
var clinicalNegatives = []string{
	"metformin 0.5 mg", "2 x 500 mg", "WBC 10 000 /µL", "250 000 platelets", "1 000 000 IU",
	"glucose 120-140 mg/dL", "BP 120/80", "Na 135-145 mmol/L", "INR 2.0-3.0", "pain 0-10",
	"LOINC 8302-2", "SNOMED 38341003", "SNOMED 44054006", "SNOMED 22298006", "SNOMED 73211009",
	"SNOMED 21921002", "RxNorm 1049630", "RxNorm 860975", "ICD-10 E11.9", "Z00.00", "CPT 99213", "CVX 208",
	"NDC 0002-3227-01", "NDC 0781-1506-10", "NDC 0781-1506-10 30 tablets", "0781-1506-10 100 mg", "NDC 00093-7180-01", "NDC 01234-567-89", "NDC 50580-506-02", "NDC 00002322701",
	"OID 2.16.840.1.113883.6.1", "1.2.840.10008.5.1.4.1.1.2", "0.9.2342.19200300.100.1.1",
	"version 4.0.1", "at 08:30", "doses at 0800, 1200, 1800", "clinic 0830-1700", "08.30 h", "in 2024", "for 3-5 days", "q4-6h", "06-12 months",
	"Boston, MA 02115", "MA 02115-1234", "0.9% NaCl 1000 mL", "eGFR 60 mL/min/1.73m2", "titer 1:64",
	"12000000 copies/mL", "10000000", "viral load 25000000", "17991231", "21000101", "99991231", "20241301", "20240132", "20230230",
	"32011931", "13141931", "0.19310314", "1.2.19310314.5", "lot 012345678", "ratio 0.12 0.34 0.56",
	"01 12 2024", "Hb 13.5 g/dL, Plt 150-400 x10^9/L",
	"05/2024", "0.5/1000", "seen 01/15, 02/20", "PEEP 05/10", "dose 025/1000 mg",
	// Numbers that begin with "00" and are no telephone number dialled
	// abroad (h-intl): spaced NDC codes with a labeler beginning 00 (5-4-2
	// and 5-3-2, also before a quantity), schedules of 24-hour times,
	// lot numbers, ranges, counts.
	"NDC 00781 1506 10", "00781 1506 10 30 tablets", "NDC 00591 123 45 30 tablets", "NDC 00093 7180 01",
	"doses at 0030 1200 1800", "0030-0130", "at 00:30, 01:00", "lot 0012 3456",
	"range 0010-0020", "0001 0002 0003", "00 12 34", "count 0 10 100", "0.001 0.01 0.1",
	// Numbers of a national identifier's length (h-intl): SNOMED CT
	// concept ids of nine digits that pass the BSN's 11-proef (210 of
	// R4's 2,267), OIDs with long arcs, epoch milliseconds, counts.
	"SNOMED 129314006", "SNOMED 131428007", "SNOMED 131439005", "OID 1.3.6.1.4.1.111222333", "urn:oid:2.16.528.1.1007.3.1",
	"1.111222333", "111222333.5 mL", "time 1795251600033", "platelets 250 000 000", "1 000 000 000 copies",
	"LOINC 8302-2, 2123-4", "ICD-10 A01.1", "NDC 2123-4567-01",
}

// TestScrubKeepsClinicalNumbers: no class of the scrub changes a
// clinical negative (clinicalNegatives), alone or in a sentence.
func TestScrubKeepsClinicalNumbers(t *testing.T) {
	for _, s := range clinicalNegatives {
		ins := []string{s, "note: " + s + ", stable."}
		for _, sp := range unicodeSpaces { // 10 000 /µL with a thin space, as Europe writes it
			ins = append(ins, strings.ReplaceAll(s, " ", sp))
		}
		for _, in := range ins {
			if got := ScrubString(in); got != in {
				t.Errorf("ScrubString(%q) = %q, want it unchanged", in, got)
			}
		}
	}
	// A SNOMED CT concept id of eight digits that reads as a valid date
	// is scrubbed: the trade-off the compact date pattern makes (of the
	// 358 eight-digit codes of R4's value sets, 16042001, Beefmaster
	// cattle breed, alone reads as a date with years to 2099; 21921002
	// too with years to 2199).
	if got := ScrubString("SNOMED 16042001"); got != "SNOMED [DATE]" {
		t.Errorf(`ScrubString("SNOMED 16042001") = %q, want "SNOMED [DATE]"`, got)
	}
	// So is a schedule of 24-hour times joined by spaces alone: it has a
	// UK number's form (0161 496 0000), and a lost schedule costs less
	// than a leaked number.
	if got := ScrubString("at 0800 1200 1800"); got != "at [PHONE]" {
		t.Errorf(`ScrubString("at 0800 1200 1800") = %q, want "at [PHONE]"`, got)
	}
}
