package minimize

import "strings"

// Identifiers as EHRs and their interfaces print them in free text,
// beyond the MRN after its own word (mrnCore): record numbers named by
// other words, HL7 v2 components and segments (a message quoted in a
// note), URNs, e-mail addresses spelt out, and dates as Japanese,
// Chinese and Korean write them.
const (
	// recordKeyword names a record number of the patient or of one of
	// the patient's encounters: Epic's EPI (the enterprise patient id)
	// and CSN (contact serial number, an encounter's), Oracle Health's
	// FIN (the financial number, an encounter's; also FIN-00551207), a
	// visit or encounter number, and, with a number's mark only (numMark:
	// "case no.", "episode #", "admission number"), a case, an episode
	// or an admission, words clinical prose uses for other things ("case
	// 3 of 5"). The capitals EPI, FIN and CSN count as written only
	// ("fin" is French for "end"). The word is kept.
	recordKeyword = `(?:\b(?:(?:EPI|FIN|CSN|(?i:visit|encounter|contact\s+serial(?:\s+number)?|financial(?:\s+number)?))\b(?:\s*` + numMark + `)?` +
		`|(?i:case|episode|admission)\b\s*` + numMark + `)|` + cjkRecordWords + `)\s*[:=#\-：]?\s*`
	// cjkRecordWords are the words Japanese, Chinese and Korean records
	// put before the patient's number: 患者番号, 患者ID, カルテ番号,
	// 診察券番号, 病歴番号 (Japanese), 病历号, 病案号, 住院号 (Chinese),
	// 환자번호, 등록번호 (Korean). \b reads ASCII only, so they stand
	// apart.
	cjkRecordWords = `(?:患者番号|患者ID|カルテ番号|診察券番号|病歴番号|病历号|病案号|住院号|환자번호|등록번호)`
	// recordValue is the number: up to three capitals (Epic's E4417206,
	// a visit's V00488213), then six digits or more, in groups joined by
	// "-" (a case number 2024-55120), so "Visit 2", "CSN 2", "FIN 2024",
	// "visit 120/80" are kept.
	recordValue = `[A-Z]{0,3}[0-9](?:-?[0-9]){5,}`

	// HL7 v2 in free text: an interface note, a message quoted in a
	// note. hl7Comp is one component of a field (HL7 v2.5.1 ch. 2,
	// 2.5.5): no "^", "|", "~" or segment end.
	hl7Comp = `[^^|~\r\n]*`
	// cxID is the ID number of a CX identifier (HL7 v2.5.1 ch. 2A, CX:
	// ID number ^ check digit ^ check digit scheme ^ assigning authority
	// ^ identifier type code), replaced where cxPatientType follows as
	// its fifth component: 58203391^^^SMH^MR, V00488213^^^SMH^VN
	// (PV1-19), 7730019452^^^SMH^AN (PID-18). The rest is kept.
	cxID = `[0-9A-Za-z][0-9A-Za-z\-]*`
	// cxPatientType are the identifier type codes of HL7 table 0203 that
	// name a patient's number: AN account, MR medical record, PI patient
	// internal, PT patient external, PN person, PE living subject
	// enterprise, VN visit, SS Social Security, MA Medicaid, MC Medicare,
	// MB member, SN subscriber, DL driver's licence, PPN passport, JHN
	// jurisdictional health, NH national health plan, NI national unique
	// individual, NIIP national insurance, HC health card; and MRN, EPI,
	// FIN and CSN, as EHRs write them.
	cxPatientType = `(?:AN|MRN?|PI|PT|PN|PE|VN|SS|MA|MC|MB|SN|DL|PPN|JHN|NH|NIIP|NI|HC|EPI|FIN|CSN)`
	cxAfter       = `\^` + hl7Comp + `\^` + hl7Comp + `\^` + hl7Comp + `\^` + cxPatientType + `(?:$|[^0-9A-Za-z])`
	// xtnBefore is an XTN telephone number's components before its area
	// code (HL7 v2.5.1 ch. 2A, XTN: telephone number ^ use code ^
	// equipment type ^ e-mail ^ country code ^ area code ^ local number
	// ^ extension): a use code of HL7 table 0201 and an equipment type of
	// table 0202 or none. xtnNumber, the area code and local number, is
	// replaced: (715)555-0162^PRN^PH^^^715^5550162 keeps them where the
	// first component is replaced as a telephone number. The extension
	// is kept.
	xtnBefore = `\^(?:PRN|ORN|WPN|VHN|ASN|EMR|NET|BPN|PRS)\^(?:PH|FX|MD|CP|SAT|BP|TDD|TTY)?\^` + hl7Comp + `\^\+?[0-9]*\^`
	xtnNumber = `[0-9]{0,5}\^[0-9][0-9\-]{2,}`

	// urn is a URN (RFC 8141: "urn:", a namespace identifier, ":" and
	// its specific string), replaced whole when its namespace is none of
	// standardURNSpaces and it holds a digit (personalURN): Oracle
	// Health's federated person principal
	// URN:CERNER:IDENTITY-FEDERATION:REALM:NESSELRODE710948 names the
	// patient and the MRN. As urlCore, it ends before a sentence's
	// punctuation.
	urn = `(?i:urn):[A-Za-z0-9][A-Za-z0-9\-]{0,31}:[^\s<>"'\x60]*[^\s<>"'\x60.,;:!?)\]]`

	// An e-mail address spelt out to get past filters, as patients and
	// staff write them in messages: "at" and "dot" as words or in
	// brackets, j dot nesselrode at example dot com,
	// j.nesselrode [at] example [dot] com, J.NESSELRODE(AT)EXAMPLE.COM.
	// The domain ends in one of speltTLDs. "at" as a bare word needs
	// the last dot spelt too ("results at mychart.com" is prose), an
	// "at" in brackets does not.
	speltDot   = `(?:\s*[\[({]dot[\])}]\s*|\s+dot\s+)`
	speltLabel = `[A-Za-z0-9\-]+`
	speltTLDs  = `(?:com|org|net|edu|gov|mil|int|info|biz|io|co|us|uk|ca|au|nz|ie|de|at|ch|fr|be|nl|lu|es|pt|it|se|no|dk|fi|pl|jp|example|test)`
	speltEmail = `(?i:[A-Za-z0-9_%+\-]+(?:(?:\.|` + speltDot + `)[A-Za-z0-9_%+\-]+)*` +
		`(?:\s*[\[({]at[\])}]\s*` + speltLabel + `(?:(?:\.|` + speltDot + `)` + speltLabel + `)*(?:\.|` + speltDot + `)` +
		`|\s+at\s+` + speltLabel + `(?:(?:\.|` + speltDot + `)` + speltLabel + `)*` + speltDot + `)` + speltTLDs + `)`

	// cjkDate is a date as Japanese and Chinese (年, 月, 日) and Korean
	// (년, 월, 일) write it: a year and a month, with or without the day,
	// or a month and a day; the year a Gregorian one or, in Japanese, an
	// era's (明治, 大正, 昭和, 平成, 令和 and the year of the era, 元 its
	// first: 昭和23年 is 1948): 昭和23年2月29日, 1948年2月29日, 2024年3月,
	// 3月5日, 1948년 2월 29일. A year alone (1948年, 昭和23年) is kept, as
	// Safe Harbor keeps it; so are a duration (3ヶ月, 3日間) and a count
	// (1日3回). Full-width digits are read after foldForScrub; a year in
	// kanji numerals with 十 (昭和二十三年) is not.
	cjkEraYear = `(?:明治|大正|昭和|平成|令和)\s*(?:[0-9]{1,2}|元)\s*年`
	cjkDate    = `(?:` + cjkEraYear + `|[0-9]{4}\s*年)\s*[0-9]{1,2}\s*月(?:\s*[0-9]{1,2}\s*日)?` +
		`|[0-9]{1,2}\s*月\s*[0-9]{1,2}\s*日` +
		`|[0-9]{4}\s*년\s*[0-9]{1,2}\s*월(?:\s*[0-9]{1,2}\s*일)?|[0-9]{1,2}\s*월\s*[0-9]{1,2}\s*일`
)

// recordPatterns are the patterns of this file's record numbers, in the
// order scrubPatterns applies them (after the MRN's).
var recordPatterns = []scrubPattern{
	newScrubPattern(classMRN, "[MRN]", recordKeyword, recordValue, notAlnumEnd).onlyIf(mayHoldRecordKeyword),
	newScrubPattern(classMRN, "[MRN]", `^|[^0-9A-Za-z\-^&]`, cxID, cxAfter).onlyIf(mayHoldCarets(4)).checked(hasDigit),
	newScrubPattern(classPhone, "[PHONE]", xtnBefore, xtnNumber, notDigitEnd).onlyIf(mayHoldCarets(6)),
}

// The patterns of a URN and a spelt e-mail address, in the order
// scrubPatterns applies them (after URLs and e-mail addresses).
var (
	urnPatterns = []scrubPattern{
		newScrubPattern(classURL, "[URL]", notAlnum, urn, ``).onlyIf(mayHoldURN).checked(personalURN),
	}
	speltEmailPatterns = []scrubPattern{
		newScrubPattern(classEmail, "[EMAIL]", `^|[^A-Za-z0-9._%+\-]`, speltEmail, notAlnumEnd).onlyIf(mayHoldSpeltAt),
	}
)

// cjkDatePatterns is the pattern of cjkDate, applied with the other
// dates.
var cjkDatePatterns = []scrubPattern{
	newScrubPattern(classDate, "[DATE]", notDigit, cjkDate, ``).onlyIf(mayHoldCJKMonth),
}

// mayHoldCJKMonth is false only for a string in which cjkDate has no
// match: each holds 月 or 월.
func mayHoldCJKMonth(s string) bool { return strings.Contains(s, "月") || strings.Contains(s, "월") }

// standardURNSpaces are the URN namespaces of standards whose URNs name
// a definition, a code system or an identifier system (urn:oid: as
// FHIR's identifier systems, urn:ietf:bcp:47, urn:iso:std:iso:3166,
// urn:ihe:, urn:hl7-org:, urn:dicom:, urn:iso-astm: as FHIR's Signature
// type system urn:iso-astm:E1762-95:2013), or a Bundle's entry
// (urn:uuid:, whose digits the other patterns read as anywhere else).
var standardURNSpaces = map[string]bool{"oid": true, "uuid": true, "ietf": true, "iso": true, "iso-astm": true, "ihe": true, "hl7-org": true, "dicom": true}

// personalURN: a URN of no standard's namespace, holding a digit.
func personalURN(core string) bool {
	nid := strings.ToLower(strings.SplitN(core, ":", 3)[1])
	return !standardURNSpaces[nid] && hasDigit(core)
}

// mayHoldURN is false only for a string in which urn has no match: each
// begins with "urn:" as (?i) reads it.
func mayHoldURN(s string) bool {
	for i := 3; i < len(s); i++ {
		if s[i] == ':' && s[i-3]|0x20 == 'u' && s[i-2]|0x20 == 'r' && s[i-1]|0x20 == 'n' {
			return true
		}
	}
	return false
}

// mayHoldSpeltAt is false only for a string in which speltEmail has no
// match: each holds "at" as (?i) reads it with white space (as \s reads
// it) or an opening bracket before it, and white space or a closing
// bracket after it.
func mayHoldSpeltAt(s string) bool {
	for i := 1; i+2 < len(s); i++ {
		if s[i]|0x20 == 'a' && s[i+1]|0x20 == 't' && strings.IndexByte("\t\n\f\r [({", s[i-1]) >= 0 && strings.IndexByte("\t\n\f\r ])}", s[i+2]) >= 0 {
			return true
		}
	}
	return false
}

// mayHoldCarets is false only for a string with fewer than n "^": a
// match of cxAfter holds four, one of xtnBefore and xtnNumber six.
func mayHoldCarets(n int) func(string) bool {
	return func(s string) bool { return strings.Count(s, "^") >= n }
}

// recordCapitals are recordKeyword's words in capitals and
// cjkRecordWords, recordWords its others as (?i) reads them.
var (
	recordCapitals = []string{"EPI", "FIN", "CSN", "患者番号", "患者ID", "カルテ番号", "診察券番号", "病歴番号", "病历号", "病案号", "住院号", "환자번호", "등록번호"}
	recordWords    = newWordSet("visit", "encounter", "contact serial", "financial", "case", "episode", "admission")
)

// mayHoldRecordKeyword is false only for a string in which
// recordKeyword and recordValue have no match: each begins with one of
// recordCapitals as written or one of recordWords, and the first digit
// after it (recordValueAfter) begins six digits or more, single "-"
// between them. A clinical note's "last visit 5 December" has not (the
// regexp ran over the whole note on every pass, and
// BenchmarkScrubClinicalNote rose by a third).
func mayHoldRecordKeyword(s string) bool {
	for _, w := range recordCapitals {
		for i := strings.Index(s, w); i >= 0; {
			if recordValueAfter(s, i+len(w)) {
				return true
			}
			k := strings.Index(s[i+1:], w)
			if k < 0 {
				break
			}
			i += 1 + k
		}
	}
	return recordWords.find(s, recordValueAfter)
}

// recordValueAfter reports whether the first digit of s from i on, past
// nothing but bytes that may stand between recordKeyword's word and
// recordValue (white space, letters: a number's mark and recordValue's
// capitals, "#", ":", "=", "-", ".", and runes beyond ASCII: "°", "："),
// begins recordValue's six digits or more.
func recordValueAfter(s string, i int) bool {
	for i < len(s) && (s[i] >= 0x80 || isAlnum(s[i]) && !isDigit(s[i]) || strings.IndexByte("\t\n\f\r #:=-.", s[i]) >= 0) {
		i++
	}
	n := 0
	for ; i < len(s); i++ {
		if isDigit(s[i]) {
			n++
		} else if s[i] != '-' || i+1 == len(s) || !isDigit(s[i+1]) || !isDigit(s[i-1]) {
			break
		}
	}
	return n >= 6
}

// An HL7 v2 segment of a patient's identity (HL7 v2.5.1 ch. 3: PID,
// 3.4.2, "Patient Identification"; NK1, 3.4.5, "Next of Kin / Associated
// Parties", a relative's; PV1, 3.4.3, "Patient Visit", its visit
// numbers; MRG, 3.4.9, "Merge Patient Information", the prior ones) is
// read field by field: where text holds one, the fields that identify
// the patient or a relative are replaced whole, each with one token,
// whatever their components (scrubHL7Segments); the others (set id,
// sex, race, language, marital status, relationship, location, ...) are
// kept. Outside these segments "^" text is read by the CX and XTN
// patterns alone, so an OBX's code 8867-4^Heart rate^LN is kept.
type hl7Field struct {
	token string
	class scrubClasses
}

// The tokens of hl7Segments' fields: names, addresses and birth places
// have no class of their own and go with mrn, the class of the
// patient's record.
var (
	hl7MRN     = hl7Field{"[MRN]", classMRN}
	hl7Name    = hl7Field{"[NAME]", classMRN}
	hl7Address = hl7Field{"[ADDRESS]", classMRN}
	hl7Date    = hl7Field{"[DATE]", classDate}
	hl7Phone   = hl7Field{"[PHONE]", classPhone}
	hl7ID      = hl7Field{"[ID]", classID}
	hl7SSN     = hl7Field{"[SSN]", classSSN}
)

// hl7Segments are the identifying fields of each segment, by number.
var hl7Segments = map[string][]hl7Field{
	"PID": {
		2: hl7MRN, 3: hl7MRN, 4: hl7MRN, // Patient ID, Patient Identifier List, Alternate Patient ID
		5: hl7Name, 6: hl7Name, 9: hl7Name, // Patient Name, Mother's Maiden Name, Patient Alias
		7: hl7Date, 29: hl7Date, 33: hl7Date, // Date/Time of Birth, Patient Death Date and Time, Last Update Date/Time
		11: hl7Address, 12: hl7Address, 23: hl7Address, // Patient Address, County Code, Birth Place
		13: hl7Phone, 14: hl7Phone, 40: hl7Phone, // Phone Number - Home, - Business, Patient Telecommunication Information (v2.7 on)
		18: hl7ID, 20: hl7ID, // Patient Account Number, Driver's License Number
		19: hl7SSN, 21: hl7MRN, // SSN Number - Patient, Mother's Identifier
	},
	"NK1": {
		2: hl7Name, 26: hl7Name, 30: hl7Name, // Name, Mother's Maiden Name, Contact Person's Name
		4: hl7Address, 32: hl7Address, // Address, Contact Person's Address
		5: hl7Phone, 6: hl7Phone, 31: hl7Phone, // Phone Number, Business Phone Number, Contact Person's Telephone Number
		12: hl7ID, 33: hl7MRN, // Employee Number, Next of Kin/Associated Party's Identifiers
		16: hl7Date, 37: hl7SSN, // Date/Time of Birth, Contact Person Social Security Number
	},
	"PV1": {
		19: hl7MRN, 50: hl7MRN, // Visit Number, Alternate Visit ID
	},
	"MRG": {
		1: hl7MRN, 2: hl7MRN, 4: hl7MRN, // Prior Patient Identifier List, Prior Alternate Patient ID, Prior Patient ID
		3: hl7ID, 5: hl7MRN, 6: hl7MRN, 7: hl7Name, // Prior Patient Account Number, Prior Visit Number, Prior Alternate Visit ID, Prior Patient Name
	},
}

// scrubHL7Segments is s with the identifying fields of each segment of
// hl7Segments it holds replaced, those of classes only. A segment begins
// at its id and "|" with no ASCII letter or digit before it and ends at
// a carriage return or a line feed, at a space before the next segment's
// id and "|" (a message pasted on one line), or at the end of s. A field
// that is empty, HL7's null "" or its token already is left as it is.
func scrubHL7Segments(s string, classes scrubClasses) string {
	var b strings.Builder
	last := 0
	for i := 3; i < len(s); {
		k := strings.IndexByte(s[i:], '|')
		if k < 0 {
			break
		}
		bar := i + k
		i = bar + 1
		start := bar - 3
		fields, ok := hl7Segments[s[start:bar]]
		if !ok || start > 0 && isAlnum(s[start-1]) {
			continue
		}
		end := hl7SegmentEnd(s, i)
		seg := strings.Split(s[start:end], "|")
		changed := false
		for n, f := range seg {
			if n >= len(fields) {
				break
			}
			if p := fields[n]; p.token != "" && classes&p.class != 0 && f != "" && f != `""` && f != p.token {
				seg[n], changed = p.token, true
			}
		}
		if changed {
			b.WriteString(s[last:start])
			b.WriteString(strings.Join(seg, "|"))
			last = end
		}
		i = end
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// mayHoldHL7Segment is false only for a string in which
// scrubHL7Segments finds no segment: each begins with an id of
// hl7Segments and "|".
func mayHoldHL7Segment(s string) bool {
	for id := range hl7Segments {
		if strings.Contains(s, id+"|") {
			return true
		}
	}
	return false
}

// hl7SegmentEnd is the end of the segment whose fields begin at s[i:].
func hl7SegmentEnd(s string, i int) int {
	for ; i < len(s); i++ {
		switch s[i] {
		case '\r', '\n':
			return i
		case ' ':
			if i+4 < len(s) && isCapital(s[i+1]) && isCapitalOrDigit(s[i+2]) && isCapitalOrDigit(s[i+3]) && s[i+4] == '|' {
				return i
			}
		}
	}
	return len(s)
}

func isCapitalOrDigit(c byte) bool { return isCapital(c) || isDigit(c) }
