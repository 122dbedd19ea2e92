package minimize

import (
	"errors"
	"regexp"
	"strings"
)

// scrubClasses is a set of identifier classes (bit mask).
type scrubClasses uint8

const (
	classPhone scrubClasses = 1 << iota
	classEmail
	classSSN
	classMRN
	classDate

	allClasses = classPhone | classEmail | classSSN | classMRN | classDate
)

var classNames = map[string]scrubClasses{
	ScrubPhone: classPhone,
	ScrubEmail: classEmail,
	ScrubSSN:   classSSN,
	ScrubMRN:   classMRN,
	ScrubDate:  classDate,
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
type scrubPattern struct {
	class scrubClasses
	token string
	re    *regexp.Regexp
	post  int // index of the "post" submatch
}

func newScrubPattern(class scrubClasses, token, pre, core, post string) scrubPattern {
	re := regexp.MustCompile(`(?P<pre>` + pre + `)(?:` + core + `)(?P<post>` + post + `)`)
	return scrubPattern{class: class, token: token, re: re, post: re.SubexpIndex("post")}
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
	mrnCore   = `(?i:mrn|medical\s+record\s+(?:number|no\.?|#))\s*[-:#]?\s*[0-9]{4,}`
	ssnCore   = `[0-9]{3}[- ][0-9]{2}[- ][0-9]{4}|(?i:ssn|social\s+security\s+(?:number|no\.?|#))\s*[-:#]?\s*[0-9]{9}`
	phoneCore = `(?:\+?1[\s.\-]?)?(?:\([0-9]{3}\)\s?|[0-9]{3}[\s.\-]?)[0-9]{3}[\s.\-]?[0-9]{4}`
	dateNum   = `[0-9]{4}[-/][0-9]{1,2}[-/][0-9]{1,2}` +
		`(?:T[0-9]{1,2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]+)?)?(?:Z|[+-][0-9]{2}:?[0-9]{2})?)?` +
		`|[0-9]{1,2}[-/][0-9]{1,2}[-/](?:[0-9]{4}|[0-9]{2})`
	dateWords = `(?i:` +
		month + `\.?\s+[0-9]{1,2}` + ordinal + `(?:,\s*|\s+)[0-9]{4}` + // March 5, 2024
		`|[0-9]{1,2}` + ordinal + `\s+(?:of\s+)?` + month + `\.?,?\s+[0-9]{4}` + // 5 March 2024
		`|` + month + `\.?,?\s+[0-9]{4}` + // March 2024
		`|` + month + `\.?\s+[0-9]{1,2}` + ordinal + // March 5
		`|[0-9]{1,2}` + ordinal + `\s+(?:of\s+)?` + month + // 5 March
		`)`
)

// scrubPatterns are applied in this order on every pass. Email first, so a
// phone-like local part goes with its address; MRN and SSN before phone, so
// their digits are not half-eaten by the looser phone pattern; dates last.
var scrubPatterns = []scrubPattern{
	newScrubPattern(classEmail, "[EMAIL]", ``, emailCore, ``),
	newScrubPattern(classMRN, "[MRN]", ``, mrnCore, ``),
	newScrubPattern(classSSN, "[SSN]", notDigit, ssnCore, notDigitEnd),
	newScrubPattern(classPhone, "[PHONE]", notDigit, phoneCore, notDigitEnd),
	newScrubPattern(classDate, "[DATE]", notDigit, dateNum, notDigitEnd),
	newScrubPattern(classDate, "[DATE]", notAlnum, dateWords, notAlnumEnd),
}

// ScrubString replaces every identifier of every class in s with a token:
//
//	phone  555-123-4567, (555) 123-4567, +1 555 123 4567, 555.123.4567  -> [PHONE]
//	email  jane.doe@example.org                                          -> [EMAIL]
//	SSN    123-45-6789, "SSN: 123456789"                                 -> [SSN]
//	MRN    MRN-12345678, "MRN: 12345678", "MRN 12345678"                 -> [MRN]
//	date   2024-03-05, 03/05/2024, 3/5/24, March 5, 2024, 5 March 2024   -> [DATE]
//
// The result is a fixpoint: scrubbing it again changes nothing, and no
// pattern of any class matches it. It is used for list metadata (titles,
// descriptions) and by the scrub obligation.
func ScrubString(s string) string {
	return scrub(s, allClasses)
}

// scrub replaces identifiers of the given classes until none is left. Every
// match contains a digit or '@' and no token does, so each pass that changes
// the string strictly reduces their number and the loop terminates.
func scrub(s string, classes scrubClasses) string {
	if !strings.ContainsAny(s, "0123456789@") {
		return s // nothing any pattern could match
	}
	for {
		next := scrubPass(s, classes)
		if next == s {
			return s
		}
		s = next
	}
}

func scrubPass(s string, classes scrubClasses) string {
	for i := range scrubPatterns {
		p := &scrubPatterns[i]
		if classes&p.class == 0 {
			continue
		}
		s = p.replace(s)
	}
	return s
}

func (p *scrubPattern) replace(s string) string {
	ms := p.re.FindAllStringSubmatchIndex(s, -1)
	if ms == nil {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, m := range ms {
		preEnd, postStart := m[3], m[2*p.post]
		b.WriteString(s[last:preEnd])
		b.WriteString(p.token)
		b.WriteString(s[postStart:m[1]])
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String()
}
