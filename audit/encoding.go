package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Record format versions (the "v" field). Decode accepts both; Append writes
// only FormatVersion. A log written by an older custos holds v1 records and
// simply continues with v2 records: nothing is rewritten, and the chain runs
// through the version change (prev_hash of the first v2 record is the hash of
// the last v1 record).
const (
	// FormatVersion1 records have no "keys" field; their Record.Keys is nil.
	FormatVersion1 = 1
	// FormatVersion2 records have a "keys" field (always an array) after
	// "dev": the secret key versions in force when the record was written.
	FormatVersion2 = 2
	// FormatVersion is the version Append writes.
	FormatVersion = FormatVersion2
)

// TimeLayout is the canonical time format: RFC 3339 in UTC with exactly nine
// fractional digits.
const TimeLayout = "2006-01-02T15:04:05.000000000Z"

// hashDomain separates audit record hashes from every other SHA-256 use. It
// names the hash scheme, not the record format: v1 and v2 records are hashed
// alike (the canonical bytes begin with their own "v", so the hash commits to
// the version).
const hashDomain = "custos/audit/v1\n"

// HashRecord returns the record hash of canonical record bytes, in lowercase
// hex:
//
//	hash = hex(SHA-256("custos/audit/v1\n" || canonical))
//
// where "custos/audit/v1\n" is the 16 ASCII bytes of the domain separator
// (ending in one line feed) and canonical is Encode(r).
func HashRecord(canonical []byte) string {
	sum := hashRaw(canonical)
	return hex.EncodeToString(sum[:])
}

func hashRaw(canonical []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(hashDomain))
	h.Write(canonical)
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// Encode returns the canonical encoding of r (Hash is not part of it) in
// format version r.V. It is a JSON object with this fixed key order and no
// insignificant whitespace:
//
//	v, seq, event_id, time, node, action, outcome, reason,
//	principal{sub, roles, client_id}, purpose_of_use, session, source,
//	uris, patients, digests, decision_id, policy_revision, obligations,
//	dev, keys, prev_hash
//
// where "keys" is present for every version except FormatVersion1 (r.Keys is
// not encoded when r.V is 1: such a record cannot exist). Strings are escaped
// minimally (see appendString); lists are always arrays ([] when empty, never
// null) in the order given; v and seq are decimal integers; time is
// r.Time.UTC() in TimeLayout; dev is true or false. Encode is total: it
// writes r.V as given, even a version Decode rejects, and bytes of a string
// that are not valid UTF-8 are replaced by U+FFFD (Append rejects such
// entries, so stored records never contain them).
func Encode(r Record) []byte {
	b := make([]byte, 0, 1024)
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(r.V), 10)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, r.Seq, 10)
	b = appendField(b, "event_id", r.EventID)
	b = appendField(b, "time", r.Time.UTC().Format(TimeLayout))
	b = appendField(b, "node", r.Node)
	b = appendField(b, "action", r.Action)
	b = appendField(b, "outcome", r.Outcome)
	b = appendField(b, "reason", r.Reason)
	b = append(b, `,"principal":{"sub":`...)
	b = appendString(b, r.Principal.Sub)
	b = append(b, `,"roles":`...)
	b = appendList(b, r.Principal.Roles)
	b = append(b, `,"client_id":`...)
	b = appendString(b, r.Principal.ClientID)
	b = append(b, '}')
	b = appendField(b, "purpose_of_use", r.PurposeOfUse)
	b = appendField(b, "session", r.Session)
	b = appendField(b, "source", r.Source)
	b = appendListField(b, "uris", r.URIs)
	b = appendListField(b, "patients", r.Patients)
	b = appendListField(b, "digests", r.Digests)
	b = appendField(b, "decision_id", r.DecisionID)
	b = appendField(b, "policy_revision", r.PolicyRevision)
	b = appendListField(b, "obligations", r.Obligations)
	b = append(b, `,"dev":`...)
	b = strconv.AppendBool(b, r.Dev)
	if r.V != FormatVersion1 {
		b = appendListField(b, "keys", r.Keys)
	}
	b = appendField(b, "prev_hash", r.PrevHash)
	b = append(b, '}')
	return b
}

func appendField(b []byte, key, val string) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return appendString(b, val)
}

func appendListField(b []byte, key string, vals []string) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return appendList(b, vals)
}

func appendList(b []byte, vals []string) []byte {
	b = append(b, '[')
	for i, v := range vals {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, v)
	}
	return append(b, ']')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string with the canonical escaping:
// '"' -> \", '\' -> \\, U+0008 -> \b, U+0009 -> \t, U+000A -> \n,
// U+000C -> \f, U+000D -> \r, every other U+0000..U+001F -> \u00XX (lowercase
// hex); everything else, including '<', '>', '&', '/', U+007F, U+2028 and
// U+2029, is written as raw UTF-8. Invalid UTF-8 becomes U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"':
				b = append(b, '\\', '"')
			case c == '\\':
				b = append(b, '\\', '\\')
			case c == '\b':
				b = append(b, '\\', 'b')
			case c == '\t':
				b = append(b, '\\', 't')
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\f':
				b = append(b, '\\', 'f')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// Decode parses canonical record bytes of format version 1 or 2 and fills
// Hash with HashRecord(b). It is strict: it accepts exactly the bytes Encode
// produces for a valid record and nothing else. Unknown, missing, duplicate
// or reordered fields, wrong types, floats, exponents, signs or leading
// zeros, null, whitespace, escapes other than the canonical ones (\" \\ \b
// \t \n \f \r and lowercase \u00xx for the other control characters),
// raw control characters, invalid UTF-8, a time not in TimeLayout (or not a
// valid date), trailing data, a version other than FormatVersion1 or
// FormatVersion2, a v1 record with a "keys" field or a v2 record without
// one, v2 keys that are empty strings or not in strictly increasing byte
// order, a prev_hash that is not 64 lowercase hex digits — all fail with an
// error wrapping ErrNonCanonical that names the byte offset, never the
// record's contents. Empty lists decode as nil slices.
//
// Decode is a single pass over b that knows the key order of each version
// (it does not use encoding/json). It copies b once: the record's strings
// share that copy (and Hash is stored beside it), its lists share one
// backing array, so a decoded record costs a few allocations and never
// aliases b, which may be memory the caller reuses (a bbolt page). Any one
// string of the record keeps that whole copy reachable: a caller that
// retains a single field of very many records should strings.Clone it.
func Decode(b []byte) (Record, error) {
	sum := hashRaw(b)
	var hx [2 * sha256.Size]byte
	hex.Encode(hx[:], sum[:])
	var sb strings.Builder
	sb.Grow(len(b) + len(hx))
	sb.Write(b)
	sb.Write(hx[:])
	all := sb.String()

	var elems [32]string
	p := parser{s: all[:len(b)], elems: elems[:0]}
	var r Record
	p.record(&r)
	if p.err != nil {
		return Record{}, p.err
	}
	r.Hash = all[len(b):]
	return r, nil
}

// parser is Decode's state: the input (as a string: string fields are
// substrings of it), the read position, the first error (every method is a
// no-op once it is set), and the elements of the lists read so far.
type parser struct {
	s     string
	pos   int
	err   error
	elems []string
}

// span is a list as a range of parser.elems.
type span struct{ from, to int }

func (p *parser) fail(what string) {
	if p.err == nil {
		p.err = fmt.Errorf("%w: %s at byte %d", ErrNonCanonical, what, p.pos)
	}
}

// record parses the whole input into r (except r.Hash).
func (p *parser) record(r *Record) {
	if !p.lit(`{"v":`) {
		return
	}
	switch {
	case p.pos < len(p.s) && p.s[p.pos] == '1':
		r.V = FormatVersion1
	case p.pos < len(p.s) && p.s[p.pos] == '2':
		r.V = FormatVersion2
	default:
		p.fail("unsupported version")
		return
	}
	p.pos++
	r.Seq = p.uintField(`,"seq":`)
	r.EventID = p.strField(`,"event_id":`)
	r.Time = p.timeField(`,"time":`)
	r.Node = p.strField(`,"node":`)
	r.Action = p.strField(`,"action":`)
	r.Outcome = p.strField(`,"outcome":`)
	r.Reason = p.strField(`,"reason":`)
	r.Principal.Sub = p.strField(`,"principal":{"sub":`)
	roles := p.listField(`,"roles":`)
	r.Principal.ClientID = p.strField(`,"client_id":`)
	p.lit(`}`)
	r.PurposeOfUse = p.strField(`,"purpose_of_use":`)
	r.Session = p.strField(`,"session":`)
	r.Source = p.strField(`,"source":`)
	uris := p.listField(`,"uris":`)
	patients := p.listField(`,"patients":`)
	digests := p.listField(`,"digests":`)
	r.DecisionID = p.strField(`,"decision_id":`)
	r.PolicyRevision = p.strField(`,"policy_revision":`)
	obligations := p.listField(`,"obligations":`)
	r.Dev = p.boolField(`,"dev":`)
	var keys span
	if r.V == FormatVersion2 {
		keys = p.listField(`,"keys":`)
	}
	r.PrevHash = p.hashField(`,"prev_hash":`)
	p.lit(`}`)
	if p.err != nil {
		return
	}
	if p.pos != len(p.s) {
		p.fail("trailing data")
		return
	}
	if len(p.elems) > 0 {
		// One backing array for every list; each list is capped so that
		// appending to one never overwrites the next.
		all := make([]string, len(p.elems))
		copy(all, p.elems)
		get := func(sp span) []string {
			if sp.from == sp.to {
				return nil
			}
			return all[sp.from:sp.to:sp.to]
		}
		r.Principal.Roles = get(roles)
		r.URIs, r.Patients, r.Digests = get(uris), get(patients), get(digests)
		r.Obligations, r.Keys = get(obligations), get(keys)
	}
	if err := checkKeys(r.Keys); err != nil {
		p.err = fmt.Errorf("%w: %v", ErrNonCanonical, err)
	}
}

// lit consumes the literal l (syntax and key names) or fails.
func (p *parser) lit(l string) bool {
	if p.err != nil {
		return false
	}
	if !strings.HasPrefix(p.s[p.pos:], l) {
		p.fail("expected " + l)
		return false
	}
	p.pos += len(l)
	return true
}

// uintField reads key and an unsigned decimal integer without sign, leading
// zeros, fraction or exponent, that fits in 64 bits.
func (p *parser) uintField(key string) uint64 {
	if !p.lit(key) {
		return 0
	}
	s, i := p.s, p.pos
	if i >= len(s) || s[i] < '0' || s[i] > '9' {
		p.fail("expected an unsigned integer")
		return 0
	}
	if s[i] == '0' {
		p.pos = i + 1 // "0" alone; a digit after it fails at the next literal
		return 0
	}
	var n uint64
	for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
		d := uint64(s[i] - '0')
		if n > (math.MaxUint64-d)/10 {
			p.fail("integer overflows 64 bits")
			return 0
		}
		n = n*10 + d
	}
	p.pos = i
	return n
}

func (p *parser) boolField(key string) bool {
	if !p.lit(key) {
		return false
	}
	switch {
	case strings.HasPrefix(p.s[p.pos:], "true"):
		p.pos += 4
		return true
	case strings.HasPrefix(p.s[p.pos:], "false"):
		p.pos += 5
		return false
	}
	p.fail("expected true or false")
	return false
}

func (p *parser) strField(key string) string {
	if !p.lit(key) {
		return ""
	}
	return p.str()
}

// strClass classifies string bytes: 0 plain ASCII, 1 a byte that ends the
// fast scan ('"', '\\', a control character), 2 a byte of a multi-byte
// UTF-8 sequence.
var strClass = func() (t [256]uint8) {
	for c := 0; c < 0x20; c++ {
		t[c] = 1
	}
	t['"'], t['\\'] = 1, 1
	for c := 0x80; c < 0x100; c++ {
		t[c] = 2
	}
	return t
}()

// str reads a canonically escaped JSON string. Without escapes (the usual
// case) the result is a substring of the input copy: no allocation.
func (p *parser) str() string {
	if p.err != nil {
		return ""
	}
	s, i := p.s, p.pos
	if i >= len(s) || s[i] != '"' {
		p.fail("expected a string")
		return ""
	}
	i++
	start := i
	var high uint8
	for i < len(s) {
		c := strClass[s[i]]
		if c == 1 {
			break
		}
		high |= c
		i++
	}
	if i >= len(s) {
		p.pos = i
		p.fail("unterminated string")
		return ""
	}
	if s[i] != '"' {
		return p.strEscaped(start, i)
	}
	v := s[start:i]
	if high != 0 && !utf8.ValidString(v) {
		p.pos = start
		p.fail("invalid UTF-8 in string")
		return ""
	}
	p.pos = i + 1
	return v
}

// strEscaped finishes str for a string starting at start whose first
// escape or control character is at i.
func (p *parser) strEscaped(start, i int) string {
	s := p.s
	out := make([]byte, 0, 2*(i-start)+16)
	out = append(out, s[start:i]...)
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			if !utf8.Valid(out) {
				p.pos = start
				p.fail("invalid UTF-8 in string")
				return ""
			}
			p.pos = i + 1
			return string(out)
		case c < 0x20:
			p.pos = i
			p.fail("raw control character in string")
			return ""
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		p.pos = i
		if i+1 >= len(s) {
			break
		}
		switch s[i+1] {
		case '"', '\\':
			out = append(out, s[i+1])
		case 'b':
			out = append(out, '\b')
		case 't':
			out = append(out, '\t')
		case 'n':
			out = append(out, '\n')
		case 'f':
			out = append(out, '\f')
		case 'r':
			out = append(out, '\r')
		case 'u':
			// Only \u00xx, lowercase hex, for a control character without
			// a short escape.
			if i+6 > len(s) || s[i+2] != '0' || s[i+3] != '0' || (s[i+4] != '0' && s[i+4] != '1') {
				p.fail("non-canonical \\u escape")
				return ""
			}
			lo := strings.IndexByte(hexDigits, s[i+5])
			if lo < 0 {
				p.fail("non-canonical \\u escape")
				return ""
			}
			c := byte(s[i+4]-'0')<<4 | byte(lo)
			switch c {
			case '\b', '\t', '\n', '\f', '\r':
				p.fail("\\u escape of a character with a short escape")
				return ""
			}
			out = append(out, c)
			i += 6
			continue
		default:
			p.fail("non-canonical escape")
			return ""
		}
		i += 2
	}
	p.pos = len(s)
	p.fail("unterminated string")
	return ""
}

// listField reads key and an array of strings; the elements are appended to
// p.elems.
func (p *parser) listField(key string) span {
	from := len(p.elems)
	if !p.lit(key) || !p.lit(`[`) {
		return span{from, from}
	}
	if p.pos < len(p.s) && p.s[p.pos] == ']' {
		p.pos++
		return span{from, from}
	}
	for p.err == nil {
		v := p.str()
		if p.err != nil {
			break
		}
		p.elems = append(p.elems, v)
		if p.pos < len(p.s) {
			switch p.s[p.pos] {
			case ',':
				p.pos++
				continue
			case ']':
				p.pos++
				return span{from, len(p.elems)}
			}
		}
		p.fail("expected , or ] in list")
	}
	return span{from, from}
}

// hashField reads key and a string of 64 lowercase hex digits.
func (p *parser) hashField(key string) string {
	if !p.lit(key) {
		return ""
	}
	s, i := p.s, p.pos
	const n = 2 * sha256.Size
	if i+n+2 > len(s) || s[i] != '"' || s[i+n+1] != '"' || !isHash(s[i+1:i+n+1]) {
		p.fail("prev_hash is not 64 lowercase hex digits")
		return ""
	}
	p.pos = i + n + 2
	return s[i+1 : i+n+1]
}

// timeField reads key and a string in TimeLayout
// ("2006-01-02T15:04:05.000000000Z") holding a valid date and time: month
// 1-12, a day that exists in that month, hour 0-23, minute and second 0-59
// (what time.Parse accepts and Format writes back identically).
func (p *parser) timeField(key string) time.Time {
	if !p.lit(key) {
		return time.Time{}
	}
	s, i := p.s, p.pos
	const n = len(TimeLayout)
	if i+n+2 > len(s) || s[i] != '"' || s[i+n+1] != '"' {
		p.fail("time is not in the canonical format")
		return time.Time{}
	}
	t := s[i+1 : i+n+1]
	num := func(a, b int) int {
		v := 0
		for j := a; j < b; j++ {
			c := t[j]
			if c < '0' || c > '9' {
				return -1
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	year, month, day := num(0, 4), num(5, 7), num(8, 10)
	hour, minute, sec, nsec := num(11, 13), num(14, 16), num(17, 19), num(20, 29)
	if t[4] != '-' || t[7] != '-' || t[10] != 'T' || t[13] != ':' || t[16] != ':' || t[19] != '.' || t[29] != 'Z' ||
		year < 0 || month < 1 || month > 12 || day < 1 || day > daysIn(month, year) ||
		hour < 0 || hour > 23 || minute < 0 || minute > 59 || sec < 0 || sec > 59 || nsec < 0 {
		p.fail("time is not in the canonical format")
		return time.Time{}
	}
	p.pos = i + n + 2
	return time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)
}

// daysIn is the number of days of month (1-12) in year (proleptic
// Gregorian, as package time).
func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// checkKeys enforces the canonical form of a v2 keys list: every identifier
// non-empty, the list in strictly increasing byte order (sorted, no
// duplicates). Append sorts and checks an entry's Keys before writing.
func checkKeys(keys []string) error {
	for i, k := range keys {
		if k == "" {
			return errors.New("empty key identifier")
		}
		if i > 0 && keys[i-1] >= k {
			return errors.New("keys are not sorted and unique")
		}
	}
	return nil
}

// isHash reports whether s is 64 lowercase hex digits.
func isHash(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
