package minimize

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// The Safe Harbor classes 9 to 15 as they appear in clinical free text
// (45 CFR 164.514(b)(2)(i)(I)-(O)): health plan beneficiary and account
// numbers, certificate and licence numbers, vehicle and device
// identifiers and serial numbers, URLs and IP addresses.
//
// A number of those classes has no form of its own: a member id, an
// account, a policy or a group number, a driver's licence, a serial
// number is whatever its issuer prints. It is known by the word before
// it, so a number (idValue) is replaced only after such a word
// (idKeyword; plateKeyword, vinKeyword), the word kept, the number
// replaced ("Acct # [ID]"). Words that clinical text uses for other
// things too ("group", "plan", "policy", "licence", "serial",
// "certificate") count only with a number's mark after them ("group #",
// "plan no.", "policy number", "licence no."): "age group 65-74",
// "Plan: recheck in 3 months" are kept. Forms
// that carry their own check (a VIN's check digit, a Spanish DNI's or
// NIE's check letter, an Italian codice fiscale's check character) are
// replaced without a keyword when the check agrees.
const (
	// numMark is the mark of a number after a word: "#", "no.", "nr",
	// "number", "num", "id", "n°".
	numMark = `(?:#|[nN][°º]\.?|(?i:number|num|nos?|nr|id)\b\.?)`
	// idWeak are words that name an identifier only with numMark.
	idWeak = `(?i:policy|group|plan|membership|beneficiary|insurance|insured|certificate|cert|licen[cs]e|registration|serial|device|contract)`
	// idStrong are words that name an identifier alone (numMark may
	// follow). Abbreviations in capitals are matched in capitals only
	// ("DL", "SN", "NSS", "DNI": "mg/dL 2024", "sn" are none).
	idStrong = `(?:` +
		// English: accounts, health plans, licences, devices.
		`(?i:acct|a/c|account|member|subscriber|claim|medicare|health\s+plan\s+(?:id|number|no\.?)|driver'?s?\s+licen[cs]e(?:\s+(?:number|no\.?|#))?|serial\s+(?:number|no\.?|#)|udi|imei)` +
		`|DL\s*(?:#|:|No\.?)|S/N|SN\s*[:#]` +
		// National health and social insurance numbers known by their
		// names: Australia's IHI (16 digits), Switzerland's AHV/AVS
		// number (756.9217.0769.85), France's INS, Germany's KVNR
		// (whatever its check digit says after its name).
		`|IHI|AHV|AVS|INS|KVNR` +
		// German.
		`|(?i:versichertennummer|versichertennr\.?|versicherungsnummer|krankenversichertennummer|mitgliedsnummer|kontonummer|policennummer|führerscheinnummer|führerschein(?:-nr\.?)?|seriennummer|serien-nr\.?)` +
		// French.
		`|(?i:(?:n[°º]|numéro)\s+(?:de\s+)?(?:sécurité\s+sociale|d'assuré|d'adhérent|de\s+compte|compte|contrat|police|permis(?:\s+de\s+conduire)?|série|serie)|permis\s+de\s+conduire)` +
		// Dutch.
		`|(?i:verzekeringsnummer|verzekerdennummer|polisnummer|relatienummer|rekeningnummer|klantnummer|lidnummer|rijbewijsnummer|rijbewijs|serienummer)` +
		// Spanish.
		`|NSS|DNI|NIE|NIF|(?i:(?:n[°º]|número)\s+de\s+(?:la\s+)?(?:seguridad\s+social|afiliación|afiliado|póliza|cuenta|serie)|tarjeta\s+sanitaria|(?:permiso|carnet)\s+de\s+conducir)` +
		// Italian.
		`|(?i:codice\s+fiscale|tessera\s+sanitaria|numero\s+di\s+(?:polizza|conto|serie|patente)|patente\s+di\s+guida)|C\.F\.` +
		`)`
	// idKeyword is the word (or words) before a number idValue.
	idKeyword = `\b(?:` + idWeak + `\s*` + numMark + `|` + idStrong + `(?:\s*` + numMark + `)?)\s*[:=]?\s*`
	// idValue is the number: capitals and digits in groups joined by
	// "-", "." or "/", and more such groups after a space each, when a
	// group begins with a digit (a NIR after "n° de sécurité sociale",
	// 1 84 12 76 451 089 46). Words in small letters end it.
	idValue = `[0-9A-Z]+(?:[\-./][0-9A-Z]+)*(?:` + sp + `[0-9][0-9A-Z]*(?:[\-./][0-9A-Z]+)*)*`
	// plateKeyword and plateValue: a vehicle's registration plate, up to
	// four groups of capitals and digits (ABC 1234, B-AB 1234,
	// AB-123-CD, 12-ABC-3).
	plateKeyword = `\b(?i:licen[cs]e\s+plate|number\s+plate|registration\s+plate|plate|kennzeichen|nummernschild|kenteken|immatriculation|plaque|matrícula|targa)(?:\s*` + numMark + `)?\s*[:=]?\s*`
	plateValue   = `[0-9A-Z]{1,4}(?:[ \-.][0-9A-Z]{1,4}){0,3}`
	// vin is a vehicle identification number: 17 characters of digits
	// and capitals but I, O and Q (49 CFR 565.15; ISO 3779), replaced
	// alone when its check digit agrees (vinCheck), and after "VIN"
	// whatever it says (a VIN from outside North America has no check
	// digit).
	vin        = `[0-9A-HJ-NPR-Z]{17}`
	vinKeyword = `\b(?i:vin|vehicle\s+identification\s+number|fahrgestellnummer)\s*[:#]?\s*`
	// udi is a GS1 UDI carrier in its human-readable form (FDA 21 CFR
	// 801.20, GS1 General Specifications 4.15): the device identifier
	// (01) and 14 digits, then production identifiers, (10) lot, (11)
	// and (17) dates, (21) serial, each with its value. The device
	// identifier alone names a model; the production identifiers name the
	// device. The whole carrier is replaced.
	udi = `\(01\)[0-9]{14}(?:` + sp + `?\((?:10|11|17|21)\)[0-9A-Za-z\-./]{1,20})*`
	// dniNie is a Spanish DNI (eight digits) or NIE (X, Y or Z and seven
	// digits) with its check letter, replaced alone when the letter
	// agrees (dniCheck).
	dniNie = `[XYZ]?[0-9]{7,8}-?[A-Z]`
	// codiceFiscale is an Italian codice fiscale: six letters of the
	// names, the year, a month's letter, the day (plus 40 for women),
	// the place's letter and three digits, and a check character
	// (cfCheck). Digits may be replaced by letters (omocodia, L to V).
	codiceFiscale = `[A-Z]{6}[0-9LMNPQRSTUV]{2}[ABCDEHLMPRST][0-9LMNPQRSTUV]{2}[A-Z][0-9LMNPQRSTUV]{3}[A-Z]`
	// urlCore is a URL with a scheme (http, https, ftp), as far as a
	// space, a quote or an angle bracket, without the punctuation that
	// ends a sentence after it; urlWWW one without a scheme that begins
	// "www." (after no "/", so that a kept URL's host is not taken
	// again).
	urlCore  = `(?i:https?|ftp)://[^\s<>"'\x60]*[^\s<>"'\x60.,;:!?)\]]`
	urlWWW   = `(?:www|WWW)\.[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+(?:[/?#][^\s<>"'\x60]*[^\s<>"'\x60.,;:!?)\]])?`
	urlStart = `^|[^/.A-Za-z0-9\-@]`
	// ipv4 is a dotted quad of octets 0 to 255; idStart and ipv4End keep
	// it from being part of an OID or a longer version (1.2.840.10008,
	// 10.0.19041.1).
	octet = `(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])`
	ipv4  = octet + `(?:\.` + octet + `){3}`
	// ipv6 is an IPv6 address of eight groups, or shortened with "::"
	// (RFC 4291 2.2, RFC 5952): 2001:db8:85a3:0:0:8a2e:370:7334,
	// 2001:db8::1, fe80::1ff:fe23:4567:890a, ::1. A time (08:30:00) has
	// neither eight groups nor "::".
	hex4 = `[0-9A-Fa-f]{1,4}`
	ipv6 = hex4 + `(?::` + hex4 + `){7}` +
		`|(?:` + hex4 + `(?::` + hex4 + `){0,6})?::(?:` + hex4 + `(?::` + hex4 + `){0,6})?`
	// ipStart and ipEnd bound an IPv6 address: no letter, digit, ".",
	// ":" beside it; ipv4End an IPv4 address, which a port may follow
	// (192.168.1.20:8080).
	ipStart = `^|[^0-9A-Za-z.:]`
	ipEnd   = `$|[^0-9A-Za-z.:]|[.:]$|[.:][^0-9A-Za-z]`
	ipv4End = `$|[^0-9A-Za-z.]|\.$|\.[^0-9A-Za-z]`
)

// The patterns of the classes url and id, in the order scrubPatterns
// applies them.
var (
	urlPatterns = []scrubPattern{
		newScrubPattern(classURL, "[URL]", ``, urlCore, ``).onlyIf(mayHoldURL).checked(personalURL),
		newScrubPattern(classURL, "[URL]", urlStart, urlWWW, ``).onlyIf(mayHoldURL),
	}
	ipPatterns = []scrubPattern{
		newScrubPattern(classURL, "[IP]", idStart, ipv4, ipv4End).onlyIf(mayHoldIPv4),
		newScrubPattern(classURL, "[IP]", ipStart, ipv6, ipEnd).onlyIf(mayHoldIPv6).checked(hasDigit),
	}
	idPatterns = []scrubPattern{
		newScrubPattern(classID, "[ID]", ``, udi, notAlnumEnd).onlyIf(mayHoldUDI),
		newScrubPattern(classID, "[ID]", vinKeyword, vin, notAlnumEnd).onlyIf(mayHoldCapitalRun(17)).checked(hasDigit),
		newScrubPattern(classID, "[ID]", idStart, vin, idEnd).onlyIf(mayHoldCapitalRun(17)).checked(vinCheck),
		newScrubPattern(classID, "[ID]", plateKeyword, plateValue, notAlnumEnd).onlyIf(plateWords.mayHold).checked(plateOK),
		newScrubPattern(classID, "[ID]", idKeyword, idValue, notAlnumEnd).onlyIf(mayHoldIDKeyword).checked(idValueOK),
		newScrubPattern(classID, "[ID]", idStart, codiceFiscale, idEnd).onlyIf(mayHoldCapitalRun(16)).checked(cfCheck),
		newScrubPattern(classID, "[ID]", idStart, dniNie, idEnd).onlyIf(mayHoldDNI).checked(dniCheck),
	}
)

// mayHoldURL is false only for a string in which urlCore has no match:
// each holds "://" or "www." or "WWW.".
func mayHoldURL(s string) bool {
	return strings.Contains(s, "://") || strings.Contains(s, "www.") || strings.Contains(s, "WWW.")
}

// personalURL is false for a URL that names a definition, not a
// person: a code system of a public terminology (terminologySystems,
// "http://loinc.org"), a URL of HL7's or the W3C's (hl7.org, fhir.org,
// w3.org and their subdomains: http://hl7.org/fhir/sid/icd-10-cm,
// http://terminology.hl7.org/CodeSystem/v3-ActCode, the XHTML namespace
// http://www.w3.org/1999/xhtml of every narrative), and the canonical
// URL of a FHIR conformance or terminology resource, or of an
// identifier system by FHIR's conventions ("/sid/", "/Id/",
// "/IdSystem/": http://example.org/fhir/StructureDefinition/intake-note,
// http://fhir.de/CodeSystem/bfarm/icd-10-gm, http://fhir.de/sid/gkv/kvid-10,
// https://fhir.nhs.uk/Id/nhs-number), which a whole-document scrub meets
// in every extension's url, coding's and identifier's system. A portal link, a web page, a FHIR server's URL of a patient
// or a resource are none of these.
func personalURL(core string) bool {
	u := strings.SplitN(core, "|", 2)[0] // a canonical's |version
	if terminologySystems[u] || canonicalURL.MatchString(u) {
		return false
	}
	return true
}

// canonicalURL matches what personalURL keeps beyond terminologySystems.
var canonicalURL = regexp.MustCompile(`^(?i:https?)://(?:(?:[A-Za-z0-9\-]+\.)*(?:hl7|fhir|w3)\.org(?:[/?#].*)?|[^/?#\s]+(?:/[A-Za-z0-9\-._~]+)*/(?:StructureDefinition|CodeSystem|ValueSet|NamingSystem|ConceptMap|ImplementationGuide|SearchParameter|OperationDefinition|CapabilityStatement|Questionnaire|IdSystem|sid|Id)(?:/[A-Za-z0-9\-._~]+)+)$`)

// mayHoldIPv6 is false only for a string in which ipv6 has no match:
// each is a run of hex digits and ":" that holds "::" or seven ":"
// (eight groups).
func mayHoldIPv6(s string) bool {
	colons, prev := 0, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ':':
			if colons++; prev == ':' || colons >= 7 {
				return true
			}
		case !isHexDigit(c):
			colons = 0
		}
		prev = c
	}
	return false
}

func isHexDigit(c byte) bool { return isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// mayHoldIPv4 is false only for a string in which ipv4 has no match:
// each is a run of digits and dots that holds three dots with a digit
// on either side.
func mayHoldIPv4(s string) bool {
	n := 0
	for i := 1; i+1 < len(s); i++ {
		switch c := s[i]; {
		case c == '.' && isDigit(s[i-1]) && isDigit(s[i+1]):
			if n++; n == 3 {
				return true
			}
		case c != '.' && !isDigit(c):
			n = 0
		}
	}
	return false
}

// mayHoldCapitalRun is a prefilter for a form of n characters or more
// of capitals and digits (vin: 17, codiceFiscale: 16): false only for
// a string without such a run.
func mayHoldCapitalRun(n int) func(string) bool {
	return func(s string) bool {
		run := 0
		for i := 0; i < len(s); i++ {
			if c := s[i]; isDigit(c) || 'A' <= c && c <= 'Z' {
				if run++; run >= n {
					return true
				}
			} else {
				run = 0
			}
		}
		return false
	}
}

// mayHoldDNI is false only for a string in which dniNie has no match:
// each holds seven digits and then a capital, or a "-" and a capital.
func mayHoldDNI(s string) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isDigit(c) {
			run++
			continue
		}
		if run >= 7 && (isCapital(c) || c == '-' && i+1 < len(s) && isCapital(s[i+1])) {
			return true
		}
		run = 0
	}
	return false
}

func isCapital(c byte) bool { return 'A' <= c && c <= 'Z' }

// A wordSet holds words, each rune case folded (foldRune), by the
// folded first rune: the prefilters of the keyword patterns look for
// them. Every word begins with an ASCII letter.
type wordSet [128][][]rune

func newWordSet(words ...string) *wordSet {
	ws := new(wordSet)
	for _, w := range words {
		f := []rune(w)
		for i, r := range f {
			f[i] = foldRune(r)
		}
		ws[f[0]] = append(ws[f[0]], f)
	}
	return ws
}

// find reports whether one of ws's words stands in s where a keyword
// after \b may begin (at the start, after a byte that is no ASCII
// letter, digit or "_", or at a rune that is none of these), as (?i)
// matches it, with after, if not nil, true at the byte after it. The
// only runes beyond ASCII that (?i) reads as an ASCII letter are
// U+017F (s) and U+212A (K).
func (ws *wordSet) find(s string, after func(s string, i int) bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if i > 0 && isWordByte(s[i-1]) && c < 0x80 {
			continue
		}
		var f rune
		switch {
		case c < 0x80:
			f = foldRune(rune(c))
		case strings.HasPrefix(s[i:], "\u017f"):
			f = 'S'
		case strings.HasPrefix(s[i:], "\u212a"):
			f = 'K'
		default:
			continue
		}
		for _, w := range ws[f] {
			if n := foldedPrefixLen(s[i:], w); n > 0 && (after == nil || after(s, i+n)) {
				return true
			}
		}
	}
	return false
}

func (ws *wordSet) mayHold(s string) bool { return ws.find(s, nil) }

func isWordByte(c byte) bool { return isAlnum(c) || c == '_' }

// foldedPrefixLen is the length in bytes of the prefix of s that is w,
// rune by folded rune, a space of w standing for one byte of white
// space or more as RE2's \s reads it, or 0.
func foldedPrefixLen(s string, w []rune) int {
	i := 0
	for _, f := range w {
		if i >= len(s) {
			return 0
		}
		if f == ' ' {
			if j := skipSpace(s, i); j > i {
				i = j
				continue
			}
			return 0
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if foldRune(r) != f {
			return 0
		}
		i += size
	}
	return i
}

// The words idKeyword and plateKeyword begin with: each alternative's
// first word (or words, a space for \s+), so that no match is missed.
var (
	idStrongWords = newWordSet("acct", "a/c", "account", "member", "subscriber", "claim", "medicare", "health plan", "driver", "serial", "udi", "imei",
		"versichertennummer", "versichertennr", "versicherungsnummer", "krankenversichertennummer", "mitgliedsnummer", "kontonummer",
		"policennummer", "führerschein", "seriennummer", "serien-nr",
		"n°", "nº", "numéro", "permis",
		"verzekeringsnummer", "verzekerdennummer", "polisnummer", "relatienummer", "rekeningnummer", "klantnummer", "lidnummer", "rijbewijs", "serienummer",
		"número", "tarjeta", "permiso", "carnet",
		"codice", "tessera", "numero", "patente")
	idWeakWords = newWordSet("policy", "group", "plan", "membership", "beneficiary", "insurance", "insured", "certificate", "cert",
		"license", "licence", "registration", "serial", "device", "contract")
	plateWords = newWordSet("license", "licence", "number", "registration", "plate", "kennzeichen", "nummernschild", "kenteken", "immatriculation",
		"plaque", "matrícula", "targa")
)

// idCapitals are the keywords idKeyword reads in capitals only
// (abbreviations): "SN" and "DL" only before ":", "#" (and "No" for
// "DL").
var idCapitals = []string{"S/N", "IHI", "AHV", "AVS", "INS", "KVNR", "NSS", "DNI", "NIE", "NIF", "C.F."}

// mayHoldIDKeyword is false only for a string in which idKeyword has no
// match: each begins with one of idCapitals as written, "SN" or "DL"
// before white space and ":", "#" or "N", one of idStrongWords, or one
// of idWeakWords followed, past white space, by "#", an "n" or an "i" as
// (?i) reads them (numMark: "no.", "nr", "number", "n°", "id").
func mayHoldIDKeyword(s string) bool {
	for _, w := range idCapitals {
		if strings.Contains(s, w) {
			return true
		}
	}
	for _, w := range [2]string{"SN", "DL"} {
		for i := strings.Index(s, w); i >= 0; {
			j := skipSpace(s, i+2)
			if j < len(s) && strings.IndexByte(":#N", s[j]) >= 0 {
				return true
			}
			k := strings.Index(s[i+1:], w)
			if k < 0 {
				break
			}
			i += 1 + k
		}
	}
	return idStrongWords.mayHold(s) || idWeakWords.find(s, func(s string, i int) bool {
		if i = skipSpace(s, i); i == len(s) {
			return false
		}
		r, _ := utf8.DecodeRuneInString(s[i:])
		f := foldRune(r)
		return r == '#' || f == foldRune('n') || f == foldRune('i')
	})
}

// skipSpace is the index of the first byte of s from i on that is not
// white space as RE2's \s reads it.
func skipSpace(s string, i int) int {
	for i < len(s) && strings.IndexByte("\t\n\f\r ", s[i]) >= 0 {
		i++
	}
	return i
}

// mayHoldUDI is false only for a string in which udi has no match.
func mayHoldUDI(s string) bool { return strings.Contains(s, "(01)") }

// hasDigit: every match of every pattern but a URL's holds a digit or
// "@" (scrubWith's first test); an address or a VIN of letters alone
// ("::a", a VIN whose check digit is X) is not taken.
func hasDigit(s string) bool { return strings.IndexAny(s, "0123456789") >= 0 }

// alnumCounts is the number of ASCII letters and of ASCII digits in s.
func alnumCounts(s string) (letters, digits int) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case isDigit(c):
			digits++
		case isAlnum(c):
			letters++
		}
	}
	return letters, digits
}

// idValueOK: a number after an identifier's keyword has a digit and
// four letters and digits or more ("group #3", "plan no. 2" are kept).
func idValueOK(core string) bool {
	l, d := alnumCounts(core)
	return d > 0 && l+d >= 4
}

// plateOK: a plate has a digit and a capital, four characters or more
// (a microbiology "plate 1234" has no letter).
func plateOK(core string) bool {
	l, d := alnumCounts(core)
	return d > 0 && l > 0 && l+d >= 4
}

// vinCheck reports whether a VIN's ninth character is its check digit:
// each character's value (a digit its own, a letter by 49 CFR 565.15(c)
// Table IV: A-H 1-8, J-N 1-5, P 7, R 9, S-Z 2-9) times the position's
// weight 8 7 6 5 4 3 2 10 0 9 8 7 6 5 4 3 2, the sum modulo 11, 10
// written "X" (49 CFR 565.15(c), whose worked example is
// 1G4AH59H45G118341). A VIN of digits alone is none (a SNOMED CT
// extension id has up to 18 digits), nor one of letters alone (hasDigit).
func vinCheck(core string) bool {
	const values = "12345678-12345-7-923456789" // A..Z; "-": I, O, Q, never in a VIN
	weights := [17]int{8, 7, 6, 5, 4, 3, 2, 10, 0, 9, 8, 7, 6, 5, 4, 3, 2}
	sum, letters := 0, 0
	for i := 0; i < 17; i++ {
		c, v := core[i], 0
		if isDigit(c) {
			v = int(c - '0')
		} else {
			v = int(values[c-'A'] - '0')
			letters++
		}
		sum += v * weights[i]
	}
	check := byte('0' + sum%11)
	if sum%11 == 10 {
		check = 'X'
	}
	return letters > 0 && hasDigit(core) && core[8] == check
}

// dniCheck reports whether a DNI's or NIE's letter is
// "TRWAGMYFPDXBNJZSQVHLCKE"[n mod 23], n its number with a NIE's X, Y,
// Z read as 0, 1, 2 (Real Decreto 1553/2005 art. 11, Orden
// INT/2058/2008 for the NIE; python-stdnum es/dni.py and es/nie.py,
// whose example is 54362315-K).
func dniCheck(core string) bool {
	core = strings.Replace(core, "-", "", 1)
	n, i := 0, 0
	if c := core[0]; c == 'X' || c == 'Y' || c == 'Z' {
		n, i = int(c-'X'), 1
	}
	if len(core) != 9 { // a DNI: eight digits and the letter; a NIE: a letter, seven digits and the letter
		return false
	}
	for ; i < len(core)-1; i++ {
		if !isDigit(core[i]) {
			return false
		}
		n = n*10 + int(core[i]-'0')
	}
	return core[len(core)-1] == "TRWAGMYFPDXBNJZSQVHLCKE"[n%23]
}

// cfCheck reports whether a codice fiscale's sixteenth character is its
// check character: the fifteen others, those in odd positions (first,
// third, ...) by the table of D.M. 23 dicembre 1976 (a digit as the
// letter of its index, 0 as A), those in even positions by their index
// (A and 0 = 0 ... Z = 25), summed modulo 26, as a letter (python-stdnum
// it/codicefiscale.py; its README's example is CCCFBA85D03L219P in
// python-codicefiscale). A code of letters alone (every digit replaced,
// omocodia) is not taken: every match of every pattern but a URL's holds
// a digit (scrubWith).
func cfCheck(core string) bool {
	if !hasDigit(core) {
		return false
	}
	odd := [26]int{1, 0, 5, 7, 9, 13, 15, 17, 19, 21, 2, 4, 18, 20, 11, 3, 6, 8, 12, 14, 16, 10, 22, 25, 24, 23}
	sum := 0
	for i := 0; i < 15; i++ {
		c := core[i]
		v := int(c - 'A')
		if isDigit(c) {
			v = int(c - '0')
		}
		if i%2 == 0 {
			v = odd[v]
		}
		sum += v
	}
	return core[15] == byte('A'+sum%26)
}
