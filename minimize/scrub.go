package minimize

import (
	"errors"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// scrubClasses is a set of identifier classes (bit mask).
type scrubClasses uint8

const (
	classPhone scrubClasses = 1 << iota
	classEmail
	classSSN
	classMRN
	classDate
	classURL
	classID

	allClasses = classPhone | classEmail | classSSN | classMRN | classDate | classURL | classID
)

// Scrub identifier classes beyond obligation.go's, usable in a scrub Fn
// too: Safe Harbor's classes 14 and 15 (URLs and IP addresses) and 9 to
// 13 (health plan, account, certificate and licence numbers, vehicle and
// device identifiers): see scrub_ids.go.
const (
	ScrubURL = "url"
	ScrubID  = "id"
)

var classNames = map[string]scrubClasses{
	ScrubPhone: classPhone,
	ScrubEmail: classEmail,
	ScrubSSN:   classSSN,
	ScrubMRN:   classMRN,
	ScrubDate:  classDate,
	ScrubURL:   classURL,
	ScrubID:    classID,
}

var errBadScrubFn = errors.New("bad scrub fn")

// parseScrubFn parses a scrub Fn: "" is every class, otherwise a comma list
// of class names (no spaces, no empty elements).
func parseScrubFn(fn string) (scrubClasses, error) {
	if fn == "" {
		return allClasses, nil
	}
	var c scrubClasses
	for _, name := range strings.Split(fn, ",") {
		bit, ok := classNames[name]
		if !ok {
			return 0, errBadScrubFn
		}
		c |= bit
	}
	return c, nil
}

// A scrubPattern replaces every match of core with token. pre and post are
// boundary contexts that are matched but kept (RE2 has no look-around); a
// match that is missed because a neighbouring match consumed its boundary is
// caught by the next pass of scrub's fixpoint loop.
//
// Under ScrubReason, a match whose core lies wholly inside a machine token
// (machineTokens) is not replaced; one that merely touches a token is.
type scrubPattern struct {
	class scrubClasses
	token string
	re    *regexp.Regexp
	// reOn is re with no "^" in pre: it matches in s[i:] where re matches
	// s at i > 0 (pre then consumes a character, as in s), for resuming
	// the search after a match that was not replaced.
	reOn *regexp.Regexp
	post int // index of the "post" submatch
	// may, if not nil, is false only for a string in which re has no
	// match: a cheap test run before re (TestScrubPrefiltersAgree,
	// FuzzScrubPrefilters hold it to re).
	may func(string) bool
	// ok, if not nil, is false for a match whose core is no identifier
	// after all (a check digit that does not agree, too few digits): such
	// a match is left as it is, and the search goes on inside it.
	ok func(core string) bool
}

func newScrubPattern(class scrubClasses, token, pre, core, post string) scrubPattern {
	compile := func(pre string) *regexp.Regexp {
		return regexp.MustCompile(`(?P<pre>` + pre + `)(?:` + core + `)(?P<post>` + post + `)`)
	}
	re := compile(pre)
	return scrubPattern{class: class, token: token, re: re, reOn: compile(strings.TrimPrefix(pre, "^|")), post: re.SubexpIndex("post")}
}

// machineToken matches what custos writes into its own audit reasons as
// opaque ids, never as prose (ScrubReason keeps them whole): a UUID, and a run of 32 or more hex digits
// in one case holding a letter (a digest such as sha256:<64 hex>, a keyed
// id hk1-<32 hex>). Only a whole run counts (machineTokens): ten digits
// inside a digest are not a telephone number, but a run glued to other
// letters or digits ("Phone5551234567", "MRN-1234567890123456") is no
// token. The run was 16 or more (h-audit13): a telephone number with six
// hex letters beside it ("5551234567abcdef", "abcdef5551234567",
// "call abcd5551234567ab") then kept its digits where the scrub had
// replaced them; no id custos writes is a shorter hex run, and a leak
// costs more than a damaged id (TestScrubKeepsNoPhoneInAShortHexRun).
// Until h-scrub2 every scrub kept tokens whole, list titles and the scrub
// obligation too, where a telephone number in a token's shape
// ("aaaaaaaa-2024-0305-1234-5551234567ab") was then released whole.
//
// A keyed id's prefix "hk1-" (audit.PseudonymPrefix) is part of its token:
// "1-" and the ten digits a hex run may begin with read as a telephone
// number with its country code, which began outside the run and was
// replaced ("hk1-0123456789abcdef…" -> "hk[PHONE]abcdef…") until
// h-review56.
var machineToken = regexp.MustCompile(`[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}|(?:hk1-)?[0-9a-f]{32,}|[0-9A-F]{32,}`)

// machineTokens returns the spans [start, end) of the machine tokens of s:
// matches of machineToken with neither a letter nor a digit on either side,
// and, for a hex run, with a letter (a run of digits alone is a number).
// A run right after a "]" is no token: it may be what is left of an
// identifier a pass replaced in part ("MRN: 0123abcdef…" -> "[MRN]abcdef…").
func machineTokens(s string) [][]int {
	var out [][]int
	for _, m := range machineToken.FindAllStringIndex(s, -1) {
		if m[0] > 0 && (isAlnum(s[m[0]-1]) || s[m[0]-1] == ']') || m[1] < len(s) && isAlnum(s[m[1]]) {
			continue
		}
		if t := s[m[0]:m[1]]; len(t) != 36 && !strings.ContainsAny(t, "abcdefABCDEF") {
			continue
		}
		out = append(out, m)
	}
	return out
}

func isAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// within reports whether [start, end) lies wholly inside one of spans.
func within(spans [][]int, start, end int) bool {
	for _, t := range spans {
		if t[0] <= start && end <= t[1] {
			return true
		}
	}
	return false
}

const (
	notDigit    = `^|[^0-9]`
	notAlnum    = `^|[^0-9A-Za-z]`
	notDigitEnd = `$|[^0-9]`
	notAlnumEnd = `$|[^0-9A-Za-z]`
	month       = `(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)`
	ordinal     = `(?:st|nd|rd|th)?`
)

// Core expressions of the identifier classes. Exposed to tests.
const (
	emailCore = `[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+`
	mrnCore   = `(?i:mrn|medical\s+record\s+(?:number|no\.?|#))\s*[-:#]?\s*(?:[A-Z]{1,3}-?)?[0-9]{4,}`
	ssnCore   = `[0-9]{3}[- ` + nbsp + `][0-9]{2}[- ` + nbsp + `][0-9]{4}|(?i:ssn|social\s+security\s+(?:number|no\.?|#))\s*[-:#]?\s*[0-9]{9}`
	phoneCore = `(?:\+?1` + phoneSep + `?)?(?:\([0-9]{3}\)` + phoneSpace + `?|[0-9]{3}` + phoneSep + `?)[0-9]{3}` + phoneSep + `?[0-9]{4}` +
		// An international number: a country code after "+", an optional
		// "(0)", then three to seven groups of digits (+44 20 7946 0958,
		// +49 (0)30 1234567, +33 1 23 45 67 89, +61 2 9876 5432).
		`|\+[1-9][0-9]{0,2}(?:` + phoneSep + `?\(0\))?` + phoneSep + `?\(?[0-9]{1,5}\)?(?:` + phoneSep + `?[0-9]{2,5}){2,6}`
	// The separators of a telephone number's groups: white space, "." and
	// "-", and the spaces typography puts between a number's groups
	// (unicodeSpaces: U+00A0 no-break, U+2007 figure, U+2009 thin, U+202F
	// narrow no-break, French typography's); RE2's \s is ASCII only, and a
	// number written with them was released whole until h-intl.
	nbsp       = `\x{00A0}\x{2007}\x{2009}\x{202F}`
	phoneSep   = `[\s.\-` + nbsp + `]`
	phoneSpace = `[\s` + nbsp + `]`
	sp         = `[ ` + nbsp + `]`    // a space between groups
	spDot      = `[ .\-` + nbsp + `]` // a space, "." or "-"
	spDash     = `[ \-` + nbsp + `]`  // a space or "-"
	// trunk is a national number's trunk prefix 0, also shown as optional
	// in parentheses, (0)20 7946 0958, as a number is written for callers
	// at home and abroad alike.
	trunk = `(?:0|\(0\)` + sp + `?)`
	// A national number, as the large health systems write them without
	// "+" and a country code: a trunk prefix 0 and an area code of one to
	// four digits more, then the subscriber's number in one run or in
	// groups. The UK (020 7946 0958, 07700 900123), Germany (030 1234567,
	// (030) 123 456 78, 0171 1234567), France (01 23 45 67 89,
	// 06.12.34.56.78), Australia ((02) 9876 5432, 0412 345 678), Japan
	// (03-1234-5678), the Netherlands (020-1234567); Germany also joins
	// area code and number with "/" (030/1234567, 089 / 123 45 67: DIN
	// 5008 before 2011), the number then of five digits or more, so a
	// month and year (05/2024) is none. A number in one run
	// after the area code has ten digits or more, so a ZIP+4 (02115-1234)
	// is none; in groups, the last has three digits or more, so an NDC
	// code (0781-1506-10, 01234-567-89) and a date (01-12-2024) are none,
	// but in France's five pairs, in four groups joined by spaces (as no
	// NDC code is written), and after an area code in parentheses
	// (TestScrubKeepsClinicalNumbers). The trunk prefix may be written
	// "(0)" (trunk), and, in the UK's form, apart: 0 20 7946 0958.
	phoneNational = `\(0[1-9][0-9]{0,3}\)` + spDash + `?(?:[0-9]{6,8}|[0-9]{2,4}(?:` + spDot + `[0-9]{2,4}){1,3})` + // (02) 9876 5432, (030) 123 456 78
		`|` + trunk + `[1-9](?:` + spDot + `[0-9]{2}){4}` + // 01 23 45 67 89, 06.12.34.56.78
		`|` + trunk + `[1-9][0-9]{1,3}` + sp + `[0-9]{2,4}` + sp + `[0-9]{2,4}` + sp + `[0-9]{2,4}` + // 030 123 456 78 (spaces only: NDC 0781-1506-10 30 tablets)
		`|` + trunk + `[1-9][0-9]{1,3}` + sp + `?/` + sp + `?(?:[0-9]{5,8}|[0-9]{3,4}(?:` + sp + `[0-9]{2,4}){1,3})` + // 030/1234567, 089 / 123 45 67
		`|(?:` + trunk + `|0` + sp + `)[1-9][0-9]{0,3}` + spDot + `[0-9]{3,4}` + spDot + `[0-9]{3,4}` + // 020 7946 0958, 0412 345 678, 03-1234-5678, 0 20 7946 0958
		`|` + trunk + `(?:[1-9]` + spDash + `?[0-9]{8}|[1-9][0-9]` + spDash + `?[0-9]{7,8}|[1-9][0-9]{2}` + spDash + `?[0-9]{6,7}|[1-9][0-9]{3}` + spDash + `?[0-9]{5,6})` // 030 1234567, 07700 900123, 020-1234567
	// An international number dialled with "00" before the country code,
	// as Europe writes it (0049 30 1234567, 0044 20 7946 0958, 0033 1 23
	// 45 67 89): the country code (one to three digits, no 0 first) and a
	// separator, an optional "(0)", then the national number (in Italy's
	// from its 0 on, 0039 06 1234 5678, as Italy dials it): an area
	// code of one to three digits and groups, or of one to four and a
	// group of five to eight (0049 30 1234567, 0044 7700 900123). phoneIntl00Digits holds the
	// national number to eight digits or more, as long as every country's
	// national numbers are but for a few small ones (ITU-T E.164 numbers
	// are at most 15 digits, the country code included). So a spaced NDC
	// code (00781 1506 10, 00591 123 45 30 tablets) and a schedule of
	// times (0030 1200 1800) are none (TestScrubKeepsClinicalNumbers).
	phoneIntl00 = `00(?:39` + spDot + `0|[1-9][0-9]{0,2}` + spDot + `(?:\(0\)` + sp + `?)?)` +
		`(?:[1-9][0-9]{0,2}(?:` + spDot + `[0-9]{2,5}){1,5}|[1-9][0-9]{0,3}` + spDot + `[0-9]{5,8})`
	// National identifiers of the health systems custos's users meet,
	// in free text, each replaced only when its check digit agrees
	// (nationalIDs' checks), so that a clinical number of the same length
	// is kept but by chance (one in ten, eleven or ninety-seven):
	//   - Germany's Krankenversichertennummer (KVNR, on the eGK): a capital
	//     and nine digits, the last a check digit of the letter's number
	//     (A = 01 … Z = 26) and the eight digits, weights 1, 2, 1, 2, …,
	//     digit sums of the products, modulo 10 (§ 290 SGB V, Anlage 1,
	//     whose worked examples are A000500015 and C000500021):
	//     A123456789;
	//   - France's NIR (numéro de sécurité sociale, INSEE): sex (1, 2, or
	//     3, 4, 7, 8 for a provisional number), year, month, département
	//     (2A, 2B for Corsica), commune, order, then a key of two digits,
	//     97 - (the thirteen digits mod 97), 2A read as 19 and 2B as 18
	//     (INSEE; python-stdnum's and betagouv/nir_validate's rule):
	//     1 84 12 76 451 089 46, 184127645108946;
	//   - Australia's Medicare card number: eight digits beginning 2 to 6,
	//     a check digit (the eight weighted 1, 3, 7, 9, 1, 3, 7, 9, modulo
	//     10), the card's issue number (1 to 9) and optionally the
	//     individual reference number (NEHTA, "Use of Healthcare
	//     Identifiers in Health Software Systems", v1.4; the Australian
	//     Digital Health Agency's NamingSystem medicarenum: 10 or 11
	//     digits): 2123 45670 1, 2123-45670-1-2, 21234567012;
	//   - Ontario's health number (OHIP): ten digits in groups of four,
	//     three and three and a version code of one or two capitals, its
	//     last digit a Luhn (mod 10) check digit (Ontario's health card
	//     validation specification, as OSCAR EMR documents it):
	//     1234 567 897, 1234-567-897-AB, 1234567897AB;
	//   - the Netherlands' burgerservicenummer (BSN): nine digits, or in
	//     groups of 4.2.3 or 3.3.3 joined by dots or spaces (unicodeSpaces
	//     too; only 4.2.3 with dots until h-scrub4), passing the 11-proef (9, 8, …, 2 times the first eight
	//     minus the last is a multiple of 11; Logius, the elfproef
	//     package's documentation): 111222333, 1112.22.333, 111 222 333,
	//     1112 22 333 (271 836 451 fails it and is kept). A SNOMED CT
	//     concept id of nine digits is none (snomedConceptID: its partition
	//     00 and Verhoeff check digit), since one in eleven would pass.
	// The UK's NHS number (ten digits, 943 476 5919, mod 11) needs no
	// pattern of its own: every way it is written, 943 476 5919,
	// 943-476-5919, 9434765919, is a North American telephone number's
	// form, and phoneCore takes it whatever its check digit says
	// (TestScrubNationalIdentifiers).
	kvnr     = `[A-Z][0-9]{9}`
	idSep    = `[ .` + nbsp + `]`
	nir      = `[1-478]` + idSep + `?[0-9]{2}` + idSep + `?[0-9]{2}` + idSep + `?(?:[0-9]{2}|2[AB])` + idSep + `?[0-9]{3}` + idSep + `?[0-9]{3}` + idSep + `?[0-9]{2}`
	medicare = `[2-6][0-9]{3}` + spDash + `?[0-9]{5}` + spDash + `?[1-9](?:` + spDash + `?[1-9])?`
	ohip     = `[0-9]{4}` + spDash + `?[0-9]{3}` + spDash + `?[0-9]{3}(?:` + spDash + `?[A-Z]{1,2})?`
	bsn      = `[0-9]{9}|[0-9]{4}` + idSep + `[0-9]{2}` + idSep + `[0-9]{3}|[0-9]{3}` + idSep + `[0-9]{3}` + idSep + `[0-9]{3}`
	// idStart and idEnd bound an identifier: no letter or digit beside
	// it, nor a "." that makes it part of a decimal or an OID.
	idStart = `^|[^0-9A-Za-z.]`
	idEnd   = `$|[^0-9A-Za-z.]|\.$|\.[^0-9]`
	dateNum = `[0-9]{4}[-/][0-9]{1,2}[-/][0-9]{1,2}` +
		`(?:T[0-9]{1,2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]+)?)?(?:Z|[+-][0-9]{2}:?[0-9]{2})?)?` +
		`|[0-9]{1,2}[-/][0-9]{1,2}[-/](?:[0-9]{4}|[0-9]{2})`
	// Dates written with dots, as most of Europe writes them (14.03.1931,
	// 14.03.31) and year first (1931.03.14); a two-digit year needs a
	// two-digit day and month. Its own boundaries (dotNumStart, dotNumEnd)
	// keep an OID's arcs (1.2.36.1.2001) whole.
	dateDots = `[0-9]{1,2}\.[0-9]{1,2}\.[0-9]{4}|[0-9]{2}\.[0-9]{2}\.[0-9]{2}|[0-9]{4}\.[0-9]{1,2}\.[0-9]{1,2}`
	// A date of eight digits without separators, where it can be one:
	// YYYYMMDD (HL7 v2's DT, also with its DTM time HHMM or HHMMSS:
	// 19310314, 19310314083000, and DTM's fraction of a second,
	// 19310314083000.0000), DDMMYYYY (14031931) and MMDDYYYY
	// (03141931), years 1800 to 2099, a valid day of its month (29
	// February in any year). The calendar keeps most eight-digit numbers
	// out: of the 358 eight-digit codes of R4's value sets (SNOMED CT
	// concept ids), one reads as a date (16042001, Beefmaster cattle
	// breed) and is scrubbed: a number that is a date is worth more
	// withheld than a code kept. Its boundaries are dateDots' (an OID's
	// arc, a decimal's fraction are no date).
	dateCompact = year4 + `(?:` + monthDay + `)(?:[0-2][0-9][0-5][0-9](?:[0-5][0-9](?:\.[0-9]{1,4})?)?)?` +
		`|(?:` + monthDay + `|` + dayMonth + `)` + year4
	year4       = `(?:18|19|20)[0-9]{2}`
	monthDay    = `(?:0[1-9]|1[0-2])(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])(?:29|30)|(?:0[13578]|1[02])31|0229`
	dayMonth    = `(?:0[1-9]|1[0-9]|2[0-8])(?:0[1-9]|1[0-2])|(?:29|30)(?:0[13-9]|1[0-2])|31(?:0[13578]|1[02])|2902`
	dotNumStart = `^|[^0-9.]`
	dotNumEnd   = `$|[^0-9.]|\.$|\.[^0-9]`
	dateWords   = `(?i:` +
		month + `\.?\s+[0-9]{1,2}` + ordinal + `(?:,\s*|\s+)[0-9]{4}` + // March 5, 2024
		`|[0-9]{1,2}` + ordinal + `\s+(?:of\s+)?` + month + `\.?,?\s+[0-9]{4}` + // 5 March 2024
		`|` + month + `\.?,?\s+[0-9]{4}` + // March 2024
		`|` + month + `\.?\s+[0-9]{1,2}` + ordinal + // March 5
		`|[0-9]{1,2}` + ordinal + `\s+(?:of\s+)?` + month + // 5 March
		`)`
)

// scrubPatterns are applied in this order on every pass. URLs first, so
// that their digits, and an address in them, go with them; then email, so a
// phone-like local part goes with its address; IP addresses before the
// numbers whose forms their octets have; the keyword identifiers of class
// id after SSN and before phone (scrub_ids.go); the record numbers of
// scrub_ehr.go after MRN; MRN and SSN before phone, so
// their digits are not half-eaten by the looser phone pattern; a number
// after "00" before the others, whose forms its national part has; the
// national identifiers after the telephone numbers (a ten-digit number is
// a telephone number first), longest form first; dates last.
var scrubPatterns = concat(urlPatterns, urnPatterns, []scrubPattern{
	newScrubPattern(classEmail, "[EMAIL]", ``, emailCore, ``),
}, speltEmailPatterns, ipPatterns, []scrubPattern{
	newScrubPattern(classMRN, "[MRN]", ``, mrnCore, ``),
}, recordPatterns, []scrubPattern{
	newScrubPattern(classSSN, "[SSN]", notDigit, ssnCore, notDigitEnd),
}, idPatterns, []scrubPattern{
	newScrubPattern(classPhone, "[PHONE]", notDigit, phoneIntl00, dotNumEnd).onlyIf(mayHoldTrunkNumber).checked(phoneIntl00Digits),
	newScrubPattern(classPhone, "[PHONE]", notDigit, phoneCore, notDigitEnd),
	newScrubPattern(classPhone, "[PHONE]", notDigit, phoneNational, dotNumEnd).onlyIf(mayHoldTrunkNumber),
	newScrubPattern(classSSN, "[ID]", idStart, kvnr, idEnd).onlyIf(mayHoldNationalID).checked(kvnrCheck),
	newScrubPattern(classSSN, "[ID]", idStart, nir, idEnd).onlyIf(mayHoldNationalID).checked(nirCheck),
	newScrubPattern(classSSN, "[ID]", idStart, medicare, idEnd).onlyIf(mayHoldNationalID).checked(medicareCheck),
	newScrubPattern(classSSN, "[ID]", idStart, ohip, idEnd).onlyIf(mayHoldNationalID).checked(ohipCheck),
	newScrubPattern(classSSN, "[ID]", idStart, bsn, idEnd).onlyIf(mayHoldNationalID).checked(bsnCheck),
	newScrubPattern(classDate, "[DATE]", notDigit, dateNum, notDigitEnd),
	newScrubPattern(classDate, "[DATE]", dotNumStart, dateCompact, dotNumEnd).onlyIf(mayHoldCompactDate),
	newScrubPattern(classDate, "[DATE]", dotNumStart, dateDots, dotNumEnd).onlyIf(mayHoldDateDots),
	newScrubPattern(classDate, "[DATE]", notAlnum, dateWords, notAlnumEnd).onlyIf(mayHoldMonthName),
	newScrubPattern(classDate, "[DATE]", notAlnum, dateWordsAnyLanguage(), notAlnumEnd).onlyIf(mayHoldMonthName),
}, cjkDatePatterns)

// concat is the lists one after the other.
func concat[T any](lists ...[]T) []T {
	var out []T
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// checked is p, replacing only a match whose core ok accepts.
func (p scrubPattern) checked(ok func(core string) bool) scrubPattern {
	p.ok = ok
	return p
}

// onlyIf is p, whose regexp runs only on a string for which may is true.
// The month patterns' alternations of some 150 names cost more than every
// other pattern together on a string with no month's name in it (most
// strings): BenchmarkScrubClinicalNote went from 0.51 to 1.05 ms/op when
// dateWordsAnyLanguage came (docs/benchmarks.md, "Scrub prefilters").
func (p scrubPattern) onlyIf(may func(string) bool) scrubPattern {
	p.may = may
	return p
}

// mayHoldTrunkNumber is false only for a string in which neither
// phoneNational nor phoneIntl00 has a match: each has a 0 right after a
// character that is no digit (or at the start), from which six digits or
// more follow within 48 characters of digits, spaces (unicodeSpaces
// too), ".", "-", "(", ")" and one "/" after three digits at least (a
// match is at most 43 characters long and holds six digits at least; one
// with "/" has it once, after an area code of three digits or more). A
// telephone number's "-0142", a time's "T09:40" and a date's
// "03/14/2024" have not as many: BenchmarkScrubClinicalNote ran the
// pattern on every pass without it.
func mayHoldTrunkNumber(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if s[i] != '0' || i > 0 && isDigit(s[i-1]) {
			continue
		}
		digits, slash := 0, false
		for j, n := i, 0; j < len(s) && n < 48; n++ {
			c := s[j]
			j++
			if isDigit(c) {
				digits++
			} else if c == '/' && !slash && digits >= 3 {
				slash = true
			} else if c >= 0x80 && unicodeSpaceAt(s, j-1) > 0 {
				j += unicodeSpaceAt(s, j-1) - 1
			} else if strings.IndexByte(" .-()", c) < 0 {
				break
			}
		}
		if digits >= 6 {
			return true
		}
	}
	return false
}

// unicodeSpaceAt is the length in bytes of the space of nbsp that s holds
// at i, or 0.
func unicodeSpaceAt(s string, i int) int {
	for _, sp := range unicodeSpaceBytes {
		if strings.HasPrefix(s[i:], sp) {
			return len(sp)
		}
	}
	return 0
}

// unicodeSpaceBytes are the runes of nbsp, UTF-8 encoded.
var unicodeSpaceBytes = []string{"\u00a0", "\u2007", "\u2009", "\u202f"}

// phoneIntl00Digits reports whether a match of phoneIntl00 has a
// national number of eight digits or more: the digits after the country
// code and its separator, a "(0)" aside.
func phoneIntl00Digits(core string) bool {
	i := 2
	for i < len(core) && isDigit(core[i]) {
		i++
	}
	n := 0
	for _, c := range []byte(strings.Replace(core[i:], "(0)", "", 1)) {
		if isDigit(c) {
			n++
		}
	}
	return n >= 8
}

// mayHoldNationalID is false only for a string in which none of the
// national identifier patterns (kvnr, nir, medicare, ohip, bsn) has a
// match: each holds a chain of nine digits or more, each joined to the
// next by nothing or by one space (unicodeSpaces too), "." or "-", the
// letter of NIR's 2A and 2B counting as a digit. A time's "T" ends a
// chain, so a timestamp (2026-03-05T09:40) has none: without the chain
// the five regexps ran on the clinical note's first pass and made
// BenchmarkScrubClinicalNote half as slow again.
func mayHoldNationalID(s string) bool {
	digits, afterDigit := 0, false
	for i := 0; i < len(s); i++ {
		c, size := s[i], 0
		if c >= 0x80 {
			size = unicodeSpaceAt(s, i)
		}
		switch {
		case isDigit(c) || afterDigit && (c == 'A' || c == 'B'):
			if digits++; digits >= 9 {
				return true
			}
			afterDigit = true
			continue
		case afterDigit && (c == ' ' || c == '.' || c == '-' || size > 0):
			if size > 0 {
				i += size - 1
			}
			afterDigit = false
			continue
		}
		digits, afterDigit = 0, false
	}
	return false
}

// digitsOf is the ASCII digits of s, in order.
func digitsOf(s string) []int {
	d := make([]int, 0, len(s))
	for i := 0; i < len(s); i++ {
		if isDigit(s[i]) {
			d = append(d, int(s[i]-'0'))
		}
	}
	return d
}

// kvnrCheck reports whether a KVNR's check digit agrees (§ 290 SGB V,
// Anlage 1): the letter as two digits (A = 01 … Z = 26), then the first
// eight digits, weighted 1, 2, 1, 2, …, each product's digit sum, the
// total modulo 10.
func kvnrCheck(core string) bool {
	letter := int(core[0]-'A') + 1
	d := append([]int{letter / 10, letter % 10}, digitsOf(core[1:])...)
	sum := 0
	for i, x := range d[:10] {
		p := x * (1 + i%2)
		sum += p/10 + p%10
	}
	return sum%10 == d[10]
}

// nirCheck reports whether a NIR's key is 97 minus its first thirteen
// digits modulo 97, the département 2A read as 19 and 2B as 18.
func nirCheck(core string) bool {
	body := make([]byte, 0, 15)
	for i := 0; i < len(core); i++ {
		if c := core[i]; isDigit(c) || c == 'A' || c == 'B' {
			body = append(body, c)
		}
	}
	switch body[6] { // the département, S YY MM DD: body[5:7]
	case 'A':
		body[5], body[6] = '1', '9'
	case 'B':
		body[5], body[6] = '1', '8'
	}
	var n uint64
	for _, c := range body[:13] {
		n = n*10 + uint64(c-'0')
	}
	return uint64(body[13]-'0')*10+uint64(body[14]-'0') == 97-n%97
}

// medicareCheck reports whether a Medicare card number's ninth digit is
// its first eight weighted 1, 3, 7, 9, 1, 3, 7, 9, modulo 10.
func medicareCheck(core string) bool {
	d := digitsOf(core)
	sum := 0
	for i, w := range [8]int{1, 3, 7, 9, 1, 3, 7, 9} {
		sum += d[i] * w
	}
	return sum%10 == d[8]
}

// ohipCheck reports whether an Ontario health number's ten digits pass
// the Luhn check.
func ohipCheck(core string) bool {
	d := digitsOf(core)
	sum := 0
	for i, x := range d[:10] {
		if i%2 == 0 { // every second digit from the right, the check digit's left neighbour first
			if x *= 2; x > 9 {
				x -= 9
			}
		}
		sum += x
	}
	return sum%10 == 0
}

// bsnCheck reports whether a BSN passes the 11-proef and is not a
// SNOMED CT concept id.
func bsnCheck(core string) bool {
	d := digitsOf(core)
	sum := -d[8]
	for i, x := range d[:8] {
		sum += (9 - i) * x
	}
	var run [9]byte
	for i, x := range d {
		run[i] = byte('0' + x)
	}
	return sum%11 == 0 && sum != 0 && !snomedConceptID(string(run[:]))
}

// mayHoldCompactDate is false only for a string in which dateCompact has
// no match: each is a whole run of 8, 12 or 14 digits.
func mayHoldCompactDate(s string) bool {
	for i := 0; i < len(s); {
		if !isDigit(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		if n := j - i; n == 8 || n == 12 || n == 14 {
			return true
		}
		i = j
	}
	return false
}

// mayHoldDateDots is false only for a string in which dateDots has no
// match: each of its forms holds a digit, ".", one or two digits, "."
// and a digit.
func mayHoldDateDots(s string) bool {
	for i := 1; i+3 < len(s); i++ {
		if s[i] != '.' || !isDigit(s[i-1]) || !isDigit(s[i+1]) {
			continue
		}
		j := i + 2
		if isDigit(s[j]) {
			j++
		}
		if j+1 < len(s) && s[j] == '.' && isDigit(s[j+1]) {
			return true
		}
	}
	return false
}

// mayHoldMonthName is false only for a string in which neither dateWords
// nor dateWordsAnyLanguage has a match. Each match of either holds a
// month's name of monthNames (dateWords' English names are among them),
// case folded as (?i) folds it ("ſept" is "sept"), with no ASCII letter
// or digit right before or after it, and a digit on one side of it past
// nothing but spaces, the separators "-", "/", "." and ",", and words of
// one or two letters ("of", "de", an ordinal's "th"). The test takes
// every such name it finds, whatever else surrounds it.
func mayHoldMonthName(s string) bool {
	rs := []rune(s)
	for a := range rs {
		if a > 0 && isAlnum7(rs[a-1]) {
			continue
		}
		for _, name := range monthNamesFolded[foldRune(rs[a])] {
			b := a + len(name)
			if b > len(rs) || b < len(rs) && isAlnum7(rs[b]) || !foldedPrefix(rs[a:], name) {
				continue
			}
			if digitPast(rs, a-1, -1) || digitPast(rs, b, 1) {
				return true
			}
		}
	}
	return false
}

// monthNamesFolded is monthNames by the first of their runes, each rune
// folded (foldRune).
var monthNamesFolded = func() map[rune][][]rune {
	m := map[rune][][]rune{}
	for n := range monthNames {
		f := []rune(n)
		for i, r := range f {
			f[i] = foldRune(r)
		}
		m[f[0]] = append(m[f[0]], f)
	}
	return m
}()

// foldRune is the smallest rune of r's case-folding orbit (the runes
// (?i) takes for r: unicode.SimpleFold's), so that two runes fold alike
// exactly when (?i) matches one for the other.
func foldRune(r rune) rune {
	if r < 0x80 {
		if 'a' <= r && r <= 'z' {
			return r - 'a' + 'A'
		}
		return r
	}
	min := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < min {
			min = f
		}
	}
	return min
}

func foldedPrefix(rs, name []rune) bool {
	for i, r := range name {
		if foldRune(rs[i]) != r {
			return false
		}
	}
	return true
}

// isAlnum7 reports whether r is an ASCII letter or digit: the runes the
// boundaries notAlnum and notAlnumEnd refuse.
func isAlnum7(r rune) bool { return r < 0x80 && isAlnum(byte(r)) }

// digitPast reports whether, from rs[i] on in direction dir (1 or -1),
// a digit comes past nothing but spaces, the separators "-", "/", "."
// and ",", and runs of one or two letters (as (?i) folds them).
func digitPast(rs []rune, i, dir int) bool {
	for 0 <= i && i < len(rs) {
		r := rs[i]
		switch {
		case '0' <= r && r <= '9':
			return true
		case unicode.IsSpace(r) || strings.ContainsRune("-/.,", r):
			i += dir
		default:
			n := 0
			for 0 <= i && i < len(rs) && isLetter7(foldRune(rs[i])) {
				i += dir
				n++
			}
			if n == 0 || n > 2 {
				return false
			}
		}
	}
	return false
}

// isLetter7 reports whether folded rune r is an ASCII letter.
func isLetter7(r rune) bool { return 'A' <= r && r <= 'Z' }

// dateWordsAnyLanguage matches a date whose month is a name or an
// abbreviation in one of monthNames' languages, with a day and a year
// (dateWords has English's shorter forms): joined by hyphens, dots or
// slashes (14-Mar-1931, 14.Mär.1931, 14/JAN/31, Mar-14-1931), or by
// spaces with a four-digit year (14. März 1931, 14 janv. 1931, 5 de mayo
// de 2024). A month name alone beside a number is not taken ("set 10",
// "out 5": words of those languages too).
func dateWordsAnyLanguage() string {
	names := make([]string, 0, len(monthNames))
	for n := range monthNames {
		names = append(names, regexp.QuoteMeta(n))
	}
	// Longest first, so that "märz" is tried before "mär".
	sort.Slice(names, func(i, j int) bool {
		if len(names[i]) != len(names[j]) {
			return len(names[i]) > len(names[j])
		}
		return names[i] < names[j]
	})
	m := `(?:` + strings.Join(names, "|") + `)`
	return `(?i:` +
		`[0-9]{1,2}[-/.]` + m + `\.?[-/.](?:[0-9]{4}|[0-9]{2})` + // 14-Mar-1931, 14.Mär.1931
		`|` + m + `\.?[-/.][0-9]{1,2}[-/.][0-9]{4}` + // Mar-14-1931
		`|[0-9]{1,2}(?:\.|st|nd|rd|th)?\s+(?:de\s+)?` + m + `\.?,?\s+(?:de\s+)?[0-9]{4}` + // 14. März 1931
		`)`
}

// ScrubString replaces every identifier of every class in s with a token:
//
//	phone  555-123-4567, (555) 123-4567, +1 555 123 4567, 555.123.4567  -> [PHONE]
//	       +44 20 7946 0958, +49 (0)30 1234567, 020 7946 0958,
//	       (030) 123 456 78, 01 23 45 67 89, (02) 9876 5432, 03-1234-5678,
//	       030/1234567, 0049 30 1234567, 0044 20 7946 0958, (0)20 7946 0958,
//	       and any of these with a no-break, figure, thin or narrow
//	       no-break space between groups
//	email  jane.doe@example.org                                          -> [EMAIL]
//	       j dot doe at example dot com, j.doe [at] example [dot] com
//	SSN    123-45-6789, "SSN: 123456789"                                 -> [SSN]
//	       national identifiers whose check digit agrees: KVNR A000500015,
//	       NIR 1 84 12 76 451 089 46, Medicare 2123 45670 1,
//	       OHIP 1234-567-897-AB, BSN 111222333                           -> [ID]
//	MRN    MRN-12345678, "MRN: 12345678", "MRN 12345678", "MRN: E4417206" -> [MRN]
//	       a record number after EPI, FIN, CSN, visit, encounter, and
//	       case no. (the word kept: "FIN [MRN]", scrub_ehr.go)
//	HL7 v2 58203391^^^SMH^MR (a CX of the patient)                      -> [MRN]^^^SMH^MR
//	       ^PRN^PH^^^715^5550162 (an XTN's area code and number)       -> ^PRN^PH^^^[PHONE]
//	       in a PID, NK1, PV1 or MRG segment, its identifying fields
//	       whole, by class: PID|1||[MRN]||[NAME]||[DATE]|F|||[ADDRESS]||…
//	date   2024-03-05, 03/05/2024, 3/5/24, March 5, 2024, 5 March 2024   -> [DATE]
//	       14.03.1931, 1931.03.14, 14-Mar-1931, 14. März 1931,
//	       19310314, 14031931, 19310314083000,
//	       昭和23年2月29日, 1948年2月29日, 2024年3月, 1948년 2월 29일
//	url    https://portal.example.org/patient/12345, www.janedoe.com     -> [URL]
//	       (not a definition's: http://loinc.org, a FHIR canonical)
//	       a URN of no standard's namespace with a digit: URN:CERNER:…:DOE710948
//	       192.168.14.27, 2001:db8::1                                    -> [IP]
//	id     "Acct 12345678", "member ID: XYZ123", "policy # P12-01",      -> [ID]
//	       "DL# D1234567", "plate ABC 1234", "SN: X1234567", "VIN …",
//	       "Versichertennummer …", "n° de sécurité sociale …", "DNI …",
//	       (the word kept), a UDI carrier (01)…(21)…, and alone a VIN,
//	       DNI, NIE or codice fiscale whose check agrees (scrub_ids.go)
//
// Numbers written in full-width digits or kanji numerals, or with their
// groups joined by en or em spaces or typographic dashes (an em dash or
// a katakana long mark ー between two digits too), are read as ASCII
// (foldForScrub).
//
// It keeps nothing whole: digits inside a UUID or a hex run are replaced as
// anywhere else ("aaaaaaaa-2024-0305-1234-5551234567ab" ->
// "aaaaaaaa-2024-0305-1234-[PHONE]ab"). It is the scrub for text that came
// from outside custos (list titles, descriptions and names, operator free
// text) and, with a choice of classes, the scrub obligation: text whose
// UUID or digest-shaped run may be anything its author wrote. A damaged id
// there costs less than a leaked telephone number. For custos's own audit
// reasons, see [ScrubReason].
//
// The result is a fixpoint: scrubbing it again changes nothing, and no
// pattern of any class finds an identifier in it (a match a pattern's
// check refuses, scrubPattern.ok, is none).
func ScrubString(s string) string {
	return scrub(s, allClasses)
}

// ScrubTokens returns the tokens ScrubString puts in place of the
// identifiers it replaces ("[PHONE]", "[EMAIL]", ...), each once, sorted:
// for a caller that must tell what a text says from what was taken out of
// it (policy/btg counts a grant's reason without them: a reason that was
// identifiers alone says nothing of why).
func ScrubTokens() []string {
	seen := map[string]bool{}
	for _, p := range scrubPatterns {
		seen[p.token] = true
	}
	for _, fields := range hl7Segments {
		for _, f := range fields {
			if f.token != "" {
				seen[f.token] = true
			}
		}
	}
	tokens := make([]string, 0, len(seen))
	for t := range seen {
		tokens = append(tokens, t)
	}
	sort.Strings(tokens)
	return tokens
}

// ScrubReason is [ScrubString] for custos's own machine text, such as the
// reason of a policy/load or policy/reject record: it replaces nothing
// inside a machine token (a UUID, a hex run of 32 or more such as a sha256
// digest or a keyed id hk1-…; see machineToken), where ten digits are no
// telephone number but the evidence the record names (a candidate's
// digest). An identifier that only touches a token is replaced as anywhere
// else.
//
// Only text custos wrote itself may be scrubbed with it: in text from a
// resource, a caller, an operator or a policy author, a telephone number
// can be written in a token's shape ("5551234567abcdef5551234567abcdef"),
// and ScrubReason keeps it.
//
// The result is a fixpoint: scrubbing it again changes nothing, and no
// pattern of any class matches it outside machine tokens.
func ScrubReason(s string) string {
	return scrubIn(s, allClasses, true)
}

// ScrubKeeping is [ScrubString] leaving every occurrence of each of keep
// as it is: for text from outside custos that quotes custos's own evidence,
// such as a policy rejection's error, which quotes the candidate's Rego
// (a policy author's text, scrubbed strictly) and ends with the candidate's
// digest (kept whole, where the strict scrub could take ten digits of it
// for a telephone number). The text between the kept strings is scrubbed
// piece by piece, so nothing of a kept string is replaced and no
// identifier is left outside them. An empty keep string is ignored.
func ScrubKeeping(s string, keep ...string) string {
	for len(keep) > 0 && keep[0] == "" {
		keep = keep[1:]
	}
	if len(keep) == 0 {
		return ScrubString(s)
	}
	parts := strings.Split(s, keep[0])
	for i, p := range parts {
		parts[i] = ScrubKeeping(p, keep[1:]...)
	}
	return strings.Join(parts, keep[0])
}

// scrub replaces identifiers of the given classes until none is left,
// machine tokens included (ScrubString). Every match contains a digit or
// '@', or, a URL, "://" or "www.", or, a spelt e-mail address, "at"
// between spaces or brackets (mayHoldSpeltAt), and no token does, so
// each pass that changes the string strictly reduces their number and
// the loop terminates; an HL7 v2 segment's field (scrubHL7Segments) becomes its
// token, which no pass changes again.
func scrub(s string, classes scrubClasses) string {
	return scrubIn(s, classes, false)
}

// scrubIn is scrub, keeping machine tokens whole if keepTokens.
func scrubIn(s string, classes scrubClasses, keepTokens bool) string {
	return scrubWith(scrubPatterns, s, classes, keepTokens)
}

// scrubWith is scrubIn with patterns for scrubPatterns (a test's
// reference: TestScrubPrefiltersAgree).
func scrubWith(patterns []scrubPattern, s string, classes scrubClasses, keepTokens bool) string {
	if folded, ok := foldForScrub(s); ok {
		// Japanese, Chinese and Korean text writes numbers in full-width
		// digits (電話 ０３－１２３４－５６７８) or kanji numerals
		// (〇三‐三六五七‐四四一八), and typography joins groups with spaces
		// and dashes (U+2002, U+2003, U+2010-U+2013) that no pattern
		// reads: the patterns run on the text folded to its canonical
		// width (golang.org/x/text/width) and those read as ASCII
		// (foldNumerals), and the folded text is what comes out when they
		// replaced something; otherwise the text as it was.
		if out := scrubWith(patterns, folded, classes, keepTokens); out != folded {
			return out
		}
		return s
	}
	if !strings.ContainsAny(s, "0123456789@") && !mayHoldURL(s) && !mayHoldHL7Segment(s) && !mayHoldSpeltAt(s) {
		return s // nothing any pattern could match
	}
	for {
		next := scrubPass(patterns, s, classes, keepTokens)
		if next == s {
			return s
		}
		s = next
	}
}

func scrubPass(patterns []scrubPattern, s string, classes scrubClasses, keepTokens bool) string {
	s = scrubHL7Segments(s, classes)
	for i := range patterns {
		p := &patterns[i]
		if classes&p.class == 0 {
			continue
		}
		s = p.replace(s, keepTokens)
	}
	return s
}

// replace replaces the core of every match of p in s (outside machine
// tokens if keepTokens). The search goes on as FindAll's would (after a match's post
// context) from a replaced match, and from the end of the core of one left
// inside a token: its post context may be the boundary a telephone number
// right after the token needs.
func (p *scrubPattern) replace(s string, keepTokens bool) string {
	if p.may != nil && !p.may(s) {
		return s
	}
	m := p.re.FindStringSubmatchIndex(s)
	if m == nil {
		return s
	}
	var tokens [][]int
	if keepTokens {
		tokens = machineTokens(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for m != nil {
		preEnd, postStart := m[3], m[2*p.post]
		next := m[1]
		if p.ok != nil && !p.ok(s[preEnd:postStart]) {
			// Not an identifier: one may begin inside it, after its
			// first character (every checked core begins with an ASCII
			// letter or digit, so next is on a rune's start).
			next = preEnd + 1
		} else if within(tokens, preEnd, postStart) {
			next = postStart
		} else {
			b.WriteString(s[last:preEnd])
			b.WriteString(p.token)
			b.WriteString(s[postStart:m[1]])
			last = m[1]
		}
		m = p.matchOn(s, next)
	}
	b.WriteString(s[last:])
	return b.String()
}

// matchOn is the first match of p in s that starts at i or later, as
// s's own indices (nil if none, or i is past the end).
func (p *scrubPattern) matchOn(s string, i int) []int {
	if i >= len(s) {
		return nil // every core is nonempty
	}
	m := p.reOn.FindStringSubmatchIndex(s[i:])
	for j := range m {
		if m[j] >= 0 {
			m[j] += i
		}
	}
	return m
}
