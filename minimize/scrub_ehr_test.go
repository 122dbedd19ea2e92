package minimize

import "testing"

// Record numbers EHRs print after a word other than MRN: Epic's EPI
// (enterprise id) and CSN (contact serial number), Oracle Health's FIN
// (the encounter's financial number), a visit or encounter number, a case
// number; and an MRN with a letter prefix (h-outside5's probe).
func TestScrubRecordNumbers(t *testing.T) {
	checkScrub(t, []scrubCase{
		{"MRN: E4417206", "[MRN]"},
		{"EPI E4417206", "EPI [MRN]"},
		{"FIN 551207", "FIN [MRN]"},
		{"FIN-00551207", "FIN-[MRN]"},
		{"CSN 81773920145", "CSN [MRN]"},
		{"CSN: 81773920145.", "CSN: [MRN]."},
		{"Visit V00488213", "Visit [MRN]"},
		{"visit #V00488213", "visit #[MRN]"},
		{"encounter number 99812233", "encounter number [MRN]"},
		{"Encounter 99812233 closed", "Encounter [MRN] closed"},
		{"case no. 2024-55120", "case no. [MRN]"},
		{"Case # 2024-55120", "Case # [MRN]"},
		{"生年月日 1948年2月29日、患者番号 00731492、", "生年月日 [DATE]、患者番号 [MRN]、"},
		{"カルテ番号：E0731492", "カルテ番号：[MRN]"},
		{"환자번호 00731492", "환자번호 [MRN]"},
	})
}

// Clinical and prose uses of the record numbers' words are kept: a trial
// schedule's visit, a case series, French "fin", a short number.
func TestScrubRecordNumbersKeepClinicalText(t *testing.T) {
	checkKept(t, []string{
		"Visit 2", "Visit 12 (week 24)", "case 3 of 5", "Case 12: 45-year-old", "CSN 2", "FIN de traitement 2024",
		"FIN 2024", "fin 551207", "epi 4417206", "follow-up visit in 6 weeks", "encounter 12", "case 2024",
		"EPI 2.5 mg", "visit 120/80", "CSN review in 2 weeks", "carotid sinus nerve (CSN) 12 Hz", "CSN: 3 visits", "OBX|1|NM|8867-4^Heart rate^LN||72|/min", "OBX|2|CWE|718-7^Hemoglobin^LN||13.5^g/dL^UCUM",
	})
}

// ehrPrefilterCases are strings at the edges of scrub_ehr.go's
// prefilters (mayHoldRecordKeyword, ...), which checkPrefilters holds to
// their regexps.
var ehrPrefilterCases = []string{
	"FIN 551207", "FIN-00551207", "xFIN 551207", "FINAL 551207", "CSN\t81773920145", "EPI E4417206", "epi E4417206",
	"viſit V00488213", "VISIT 00488213", "Visit\nnumber 00488213", "_visit 00488213", "encounter-99812233",
	"contact  serial 81773920145", "financial no. 551207", "case 2024-55120", "Case nr 2024-55120", "Episode ID 00551207",
	"admission n° 4417206", "Visit 2", "last visit 5 December 2025, call 6175550111", "Visit V-00488213", "visit 12-3456", "visit 1-2-3-4-5-6",
	"visit 12--3456", "CSN 81773-", "EPI\u00a0E4417206", "FIN：551207", "visit ſ 123456", "visit ID: AB 123456",
	"58203391^^^SMH^MR", "x58203391^^^SMH^MR", "-58203391^^^SMH^MR", "58203391^^^SMH^MRX", "58203391^1^M10^SMH&1.2.3&ISO^PI|",
	"^PRN^PH^^^715^5550162", "^PRN^PH^^+1^715^555-0162^12", "^NET^Internet^a@b.org^^^5550162", "^^^^^", "PID|1||x^^^y^MR", "NK1|", "MRG|1", "PV1|", "xPV1|1", "PV1", "|PID|",
	"URN:X:1", "uRn:cerner:a1", "xurn:cerner:1", "urn:oid:1.2", "urn::1", "j AT example DOT com", "j\tat\nexample dot com",
	"j(at)x.com", "j [at]x.com", "j{AT}x{dot}org", "at x dot com", "j at x dot com", "j at x.com", "[at] x.com",
	"患者番号 00731492", "x患者ID:123456", "昭和23年2月29日", "3月", "12月31日", "1948年 2月", "2월 3일", "月1日", "1월",
}

// TestScrubEHRPrefiltersAgree: scrub_ehr.go's prefilters are false only
// where their plain regexps find nothing.
func TestScrubEHRPrefiltersAgree(t *testing.T) {
	for _, s := range ehrPrefilterCases {
		checkPrefilters(t, s)
	}
}

// HL7 v2 in free text (an interface note, the original message quoted in
// a note): a CX identifier of the patient before its assigning authority
// and type (PID-3's 58203391^^^SMH^MR, PV1-19's V00488213^^^SMH^VN), an
// XTN's area code and local number components, and in a PID segment
// every field that identifies the patient (HL7 v2.5.1 ch. 3, 3.4.2).
func TestScrubHL7v2(t *testing.T) {
	const pid = "PID|1||58203391^^^SMH^MR~531862047^^^SSA^SS||HAVERBROOK^PERPETUA^LISLE||19461104|F|||2209 TAMARACK SPUR^^RHINELANDER^WI^54501||(715)555-0162^PRN^PH^^^715^5550162|||M||7730019452^^^SMH^AN|531-86-2047|||N||||||||N"
	checkScrub(t, []scrubCase{
		{"PID|1||58203391^^^SMH^MR", "PID|1||[MRN]"},
		{"MRN 58203391^^^SMH^MR", "[MRN]^^^SMH^MR"},
		{"id 58203391^^^SMH^PI, 58203391^^^SMH^MRN", "id [MRN]^^^SMH^PI, [MRN]^^^SMH^MRN"},
		{"ZV1|1|V00488213^^^SMH^VN", "ZV1|1|[MRN]^^^SMH^VN"},
		{"(715)555-0162^PRN^PH^^^715^5550162", "[PHONE]^PRN^PH^^^[PHONE]"},
		{"ZNK|1|HAVERBROOK^LUCIUS|SPO||^PRN^PH^^^715^5550177", "ZNK|1|HAVERBROOK^LUCIUS|SPO||^PRN^PH^^^[PHONE]"},
		{"^WPN^PH^^1^715^5550162^12", "^WPN^PH^^1^[PHONE]^12"},
		{pid, "PID|1||[MRN]||[NAME]||[DATE]|F|||[ADDRESS]||[PHONE]|||M||[ID]|[SSN]|||N||||||||N"},
		{"MSH|^~\\&|ADT|SMH|||20261207||ADT^A01|MSG00417|P|2.5.1\r" + pid + "\rPV1|1|I",
			"MSH|^~\\&|ADT|SMH|||[DATE]||ADT^A01|MSG00417|P|2.5.1\rPID|1||[MRN]||[NAME]||[DATE]|F|||[ADDRESS]||[PHONE]|||M||[ID]|[SSN]|||N||||||||N\rPV1|1|I"},
		{"note: PID|||||DOE^JANE^Q||19490217 PV1|1|I|4W^412", "note: PID|||||[NAME]||[DATE] PV1|1|I|4W^412"},
		{"PID|||||DOE^JANE^Q", "PID|||||[NAME]"},
		{"PID|1|\"\"|\"\"|", "PID|1|\"\"|\"\"|"},
	})
	checkKept(t, []string{
		"OBX|1|NM|8867-4^Heart rate^LN||72|/min", "OBX|5|CWE|2093-3^Cholesterol^LN^^^^2.74||200^mg/dL^UCUM|||N|||F",
		"ADT^A01^ADT_A01", "RXA|0|1|||08^HepB^CVX|0.5|mL", "x^y^z^w^v", "E11.9^Type 2 diabetes^I10",
		"PIDs|1|2", "rapid|1||2", "^PRN^PH^^^^", "a^PRN^PH^^^715^",
	})
}

// TestScrubPIDByClass: a PID field is replaced only when its class is
// asked for; names and addresses go with mrn.
func TestScrubPIDByClass(t *testing.T) {
	const in = "PID|1||58203391^^^SMH^MR||DOE^JANE^Q||19490217|F|||12 Main St^^Springfield^MA^01101||^PRN^PH^^^715^5550162|||||7730019452|531-86-2047"
	for fn, want := range map[string]string{
		"date":   "PID|1||58203391^^^SMH^MR||DOE^JANE^Q||[DATE]|F|||12 Main St^^Springfield^MA^01101||^PRN^PH^^^715^5550162|||||7730019452|531-86-2047",
		"mrn":    "PID|1||[MRN]||[NAME]||19490217|F|||[ADDRESS]||^PRN^PH^^^715^5550162|||||7730019452|531-86-2047",
		"phone":  "PID|1||58203391^^^SMH^MR||DOE^JANE^Q||19490217|F|||12 Main St^^Springfield^MA^01101||[PHONE]|||||[PHONE]|531-86-2047", // ten digits: a telephone number's form
		"ssn,id": "PID|1||58203391^^^SMH^MR||DOE^JANE^Q||19490217|F|||12 Main St^^Springfield^MA^01101||^PRN^PH^^^715^5550162|||||[ID]|[SSN]",
	} {
		out, err := Text([]byte(in), []Obligation{{Op: OpScrub, Fn: fn}}, Options{})
		if err != nil || string(out) != want {
			t.Errorf("scrub %s:\n got %q, %v\nwant %q", fn, out, err, want)
		}
	}
}

// A URN whose namespace is no standard's carries what its issuer puts in
// it (Oracle Health's federated person principal names the patient and
// the MRN); an e-mail address is spelt out to get past filters.
func TestScrubURNsAndSpeltEmails(t *testing.T) {
	checkScrub(t, []scrubCase{
		{"URN:CERNER:IDENTITY-FEDERATION:REALM:NESSELRODE710948", "[URL]"},
		{"principal urn:cerner:identity-federation:realm:nesselrode710948-7.", "principal [URL]."},
		{"urn:epic:patient:E4417206", "[URL]"},
		{"j dot nesselrode at example dot com", "[EMAIL]"},
		{"write to j.nesselrode [at] example [dot] com.", "write to [EMAIL]."},
		{"J.NESSELRODE(AT)EXAMPLE.COM", "[EMAIL]"},
		{"b_nesselrode {at} mail dot example dot org", "[EMAIL]"},
		{"mail: jane at example dot org", "mail: [EMAIL]"},
	})
	checkKept(t, []string{
		"urn:oid:2.16.840.1.113883.4.1", "urn:ietf:bcp:47", "urn:iso:std:iso:3166", "urn:ietf:rfc:3986",
		"urn:uuid:2f1c9d3e-8b4a-4c1e-9f00-aa01bc02cd03", "urn:ihe:iti:xds:2013:referral", "urn:hl7-org:v3",
		"urn:dicom:uid", "urn:iso-astm:E1762-95:2013", "burn: 2 cm", "seen at home, dot com bubble", "at rest. dot on the chart", "pain at 5 dot 3",
		"seen at St. Mary's", "arrived at 10.30", "the patient at Example.Hospital rests", "look at this",
		"results at mychart.com", "seen at walgreens.com", "at [dot] com", "meet at noon dot", "dot at dot",
	})
}

// Dates as Japanese, Chinese and Korean write them: a Japanese era's
// year (昭和23年: 1948), or a Gregorian one, with month and day, and a
// month and day; the year alone is kept (Safe Harbor keeps it). A
// katakana long mark or an em dash between a number's groups.
func TestScrubCJKDatesAndDashes(t *testing.T) {
	checkScrub(t, []scrubCase{
		{"昭和23年2月29日", "[DATE]"},
		{"生年月日: 1948年2月29日生", "生年月日: [DATE]生"},
		{"平成元年1月8日", "[DATE]"},
		{"令和6年 3月 5日受診", "[DATE]受診"},
		{"2024年3月", "[DATE]"},
		{"3月5日に受診", "[DATE]に受診"},
		{"１９４８年２月２９日", "[DATE]"},
		{"1948년 2월 29일", "[DATE]"},
		{"2024年3月5日", "[DATE]"},
		{"03ー3657ー4418", "[PHONE]"},
		{"電話 〇三ー三六五七ー四四一八", "電話 [PHONE]"},
		{"555—123—4567", "[PHONE]"},
		{"call 555―123―4567", "call [PHONE]"},
	})
	checkKept(t, []string{
		"昭和23年", "1948年", "2024年度", "3日間", "3ヶ月", "3か月後", "毎月1日", "1日3回", "コーヒー 2杯", "5—10 mg",
		"2—3 days — then stop", "ー3657ー", "2월",
	})
}

// The segments beside PID that name the patient or a relative: NK1 (a
// relative's name, address, telephone numbers, birth date, identifiers,
// SSN), PV1's visit numbers, MRG's prior identifiers and name (HL7
// v2.5.1 ch. 3, 3.4.5, 3.4.3, 3.4.9). Seen in outside5's message: the
// spouse's address and PV1-19 V00488213 came out whole.
func TestScrubHL7v2OtherSegments(t *testing.T) {
	checkScrub(t, []scrubCase{
		{"NK1|1|HAVERBROOK^LUCIUS|SPO^Spouse^HL70063|2209 TAMARACK SPUR^^RHINELANDER^WI^54501|(715)555-0177",
			"NK1|1|[NAME]|SPO^Spouse^HL70063|[ADDRESS]|[PHONE]"},
		{"PV1|1|I|4W^412^B^SMH||||||||||||||||V00488213", "PV1|1|I|4W^412^B^SMH||||||||||||||||[MRN]"},
		{"MRG|58203391^^^SMH^MR||7730019452|||V00488213|HAVERBROOK^PERPETUA", "MRG|[MRN]||[ID]|||[MRN]|[NAME]"},
		{"MRG|||||||HAVERBROOK^PERPETUA", "MRG|||||||[NAME]"},
	})
	checkKept(t, []string{"PV1|1|I|4W^412^B^SMH", "NK1|1", "XNK1|1|DOE^JOHN"})
}
