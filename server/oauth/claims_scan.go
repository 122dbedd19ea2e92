package oauth

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Indexes into rawClaims: the claims parseClaims reads. The last five have
// configurable names (claimNames) which may equal a fixed name or each
// other; a member then fills every slot whose name it has.
const (
	claimIss = iota
	claimSub
	claimJti
	claimAud
	claimExp
	claimNbf
	claimIat
	claimAzp
	claimClientID
	claimScope
	claimScp
	claimAct
	claimTenant   // claimNames.tenant
	claimPurpose  // claimNames.purpose
	claimRoles    // claimNames.roles
	claimPatients // claimNames.patients
	claimClient   // claimNames.client, if not ""
	numClaims
)

// rawClaims holds, for each claim parseClaims reads, the raw JSON value of
// the last member of that name (nil if there is none): what
// json.Unmarshal into a map[string]json.RawMessage would have given.
type rawClaims [numClaims]json.RawMessage

// scanClaims finds the claims parseClaims reads in payload. ok is false
// exactly when payload is not a JSON object (json.Unmarshal into a map
// would fail or give nil).
//
// It exists for speed: decoding the payload into a
// map[string]json.RawMessage allocates for every member, and was most of
// the cost of parseClaims. Instead the payload is validated once with
// json.Valid, and then its top-level members are walked by a scanner that
// assumes valid JSON (so it checks no syntax and can not run off the end)
// and keeps slices of payload, allocating only to unescape a key. Keys
// are compared after JSON unescaping, as the map decode compares them;
// duplicate keys keep the last value, as the map decode does. The map-based decode survives as
// parseClaimsReference in claims_test.go, and FuzzParseClaimsEquivalent
// checks that both agree on every input.
func scanClaims(payload []byte, n claimNames) (raw rawClaims, ok bool) {
	if !json.Valid(payload) {
		return raw, false
	}
	// From here on payload is one valid JSON value with optional
	// surrounding whitespace.
	i := skipSpace(payload, 0)
	if payload[i] != '{' {
		return raw, false // array, string, number, true, false or null
	}
	i = skipSpace(payload, i+1)
	if payload[i] == '}' {
		return raw, true
	}
	for {
		// payload[i] is the opening quote of a key.
		end, escaped := stringEnd(payload, i)
		key := payload[i+1 : end-1]
		if escaped || !utf8.Valid(key) {
			// Unescape as the map decode does (it also replaces invalid
			// UTF-8 with U+FFFD). Rare: the slow way is fine.
			var s string
			if json.Unmarshal(payload[i:end], &s) != nil {
				return raw, false // unreachable for valid JSON
			}
			key = []byte(s)
		}
		i = skipSpace(payload, end) // at ':'
		i = skipSpace(payload, i+1) // at the value
		end = valueEnd(payload, i)
		raw.set(key, payload[i:end:end], n) // cap: nobody may append into payload
		i = skipSpace(payload, end)         // at ',' or '}'
		if payload[i] == '}' {
			return raw, true
		}
		i = skipSpace(payload, i+1)
	}
}

// set records v as the value of every claim named key.
func (raw *rawClaims) set(key, v []byte, n claimNames) {
	switch string(key) {
	case "iss":
		raw[claimIss] = v
	case "sub":
		raw[claimSub] = v
	case "jti":
		raw[claimJti] = v
	case "aud":
		raw[claimAud] = v
	case "exp":
		raw[claimExp] = v
	case "nbf":
		raw[claimNbf] = v
	case "iat":
		raw[claimIat] = v
	case "azp":
		raw[claimAzp] = v
	case "client_id":
		raw[claimClientID] = v
	case "scope":
		raw[claimScope] = v
	case "scp":
		raw[claimScp] = v
	case "act":
		raw[claimAct] = v
	}
	if string(key) == n.tenant {
		raw[claimTenant] = v
	}
	if string(key) == n.purpose {
		raw[claimPurpose] = v
	}
	if string(key) == n.roles {
		raw[claimRoles] = v
	}
	if string(key) == n.patients {
		raw[claimPatients] = v
	}
	if n.client != "" && string(key) == n.client {
		raw[claimClient] = v
	}
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace, or len(b).
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// stringEnd returns the index just past the JSON string that starts at
// b[i] (a '"') and whether it contains escapes. b must be valid JSON.
func stringEnd(b []byte, i int) (end int, escaped bool) {
	i++
	for {
		q := i + bytes.IndexByte(b[i:], '"')
		bs := bytes.IndexByte(b[i:q], '\\')
		if bs < 0 {
			return q + 1, escaped
		}
		// Skip the backslash and the byte it escapes (which may be '"';
		// the hex digits of \uXXXX are neither '"' nor '\\').
		escaped = true
		i += bs + 2
	}
}

// valueEnd returns the index just past the JSON value that starts at b[i].
// b must be valid JSON.
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		end, _ := stringEnd(b, i)
		return end
	case '{', '[':
		depth := 0
		for {
			switch b[i] {
			case '"':
				i, _ = stringEnd(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
	default: // number, true, false, null
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// plainStrings returns the elements of a JSON array whose elements are all
// plain strings (see plainString), taken from a validated document; ok is
// false for anything else, which the caller decodes the slow way. An empty
// array gives a non-nil empty slice, as encoding/json does.
func plainStrings(v []byte) (ss []string, ok bool) {
	if len(v) < 2 || v[0] != '[' {
		return nil, false
	}
	i := skipSpace(v, 1)
	if i < len(v) && v[i] == ']' {
		return []string{}, true
	}
	for i < len(v) && v[i] == '"' {
		j := bytes.IndexByte(v[i+1:], '"')
		if j < 0 {
			return nil, false
		}
		s := v[i+1 : i+1+j]
		if bytes.IndexByte(s, '\\') >= 0 || !utf8.Valid(s) {
			return nil, false
		}
		ss = append(ss, string(s))
		if i = skipSpace(v, i+j+2); i >= len(v) {
			return nil, false
		}
		switch v[i] {
		case ']':
			return ss, true
		case ',':
			i = skipSpace(v, i+1)
		default:
			return nil, false
		}
	}
	return nil, false
}
