package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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

// wireRecord is the decoding target. Decode never trusts it on its own: the
// result is re-encoded and must equal the input byte for byte.
type wireRecord struct {
	V              int           `json:"v"`
	Seq            uint64        `json:"seq"`
	EventID        string        `json:"event_id"`
	Time           string        `json:"time"`
	Node           string        `json:"node"`
	Action         string        `json:"action"`
	Outcome        string        `json:"outcome"`
	Reason         string        `json:"reason"`
	Principal      wirePrincipal `json:"principal"`
	PurposeOfUse   string        `json:"purpose_of_use"`
	Session        string        `json:"session"`
	Source         string        `json:"source"`
	URIs           []string      `json:"uris"`
	Patients       []string      `json:"patients"`
	Digests        []string      `json:"digests"`
	DecisionID     string        `json:"decision_id"`
	PolicyRevision string        `json:"policy_revision"`
	Obligations    []string      `json:"obligations"`
	Dev            bool          `json:"dev"`
	Keys           *[]string     `json:"keys"` // nil: absent (or null)
	PrevHash       string        `json:"prev_hash"`
}

type wirePrincipal struct {
	Sub      string   `json:"sub"`
	Roles    []string `json:"roles"`
	ClientID string   `json:"client_id"`
}

// Decode parses canonical record bytes of format version 1 or 2 and fills
// Hash with HashRecord(b). It is strict: anything but the exact output of
// Encode for some valid record — unknown or missing fields, duplicate keys,
// wrong types, floats, null, other key order, whitespace, escapes or number
// forms, invalid UTF-8, trailing data, a version other than FormatVersion1
// or FormatVersion2, a v1 record with a "keys" field or a v2 record without
// one, v2 keys that are empty strings or not in strictly increasing byte
// order, a prev_hash that is not 64 lowercase hex digits — fails with an
// error wrapping ErrNonCanonical. Empty lists decode as nil slices.
func Decode(b []byte) (Record, error) {
	var w wireRecord
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Record{}, fmt.Errorf("%w: %v", ErrNonCanonical, err)
	}
	var keys []string
	switch w.V {
	case FormatVersion1:
		if w.Keys != nil {
			return Record{}, fmt.Errorf("%w: a version 1 record has no keys field", ErrNonCanonical)
		}
	case FormatVersion2:
		if w.Keys == nil {
			return Record{}, fmt.Errorf("%w: a version 2 record needs a keys array", ErrNonCanonical)
		}
		keys = *w.Keys
		if err := checkKeys(keys); err != nil {
			return Record{}, fmt.Errorf("%w: %v", ErrNonCanonical, err)
		}
	default:
		return Record{}, fmt.Errorf("%w: unsupported version %d", ErrNonCanonical, w.V)
	}
	t, err := time.Parse(TimeLayout, w.Time)
	if err != nil {
		return Record{}, fmt.Errorf("%w: time is not in the canonical format", ErrNonCanonical)
	}
	if !isHash(w.PrevHash) {
		return Record{}, fmt.Errorf("%w: prev_hash is not 64 lowercase hex digits", ErrNonCanonical)
	}
	r := Record{
		V: w.V,
		Entry: Entry{
			Action:  w.Action,
			Outcome: w.Outcome,
			Reason:  w.Reason,
			Principal: Principal{
				Sub:      w.Principal.Sub,
				Roles:    nilIfEmpty(w.Principal.Roles),
				ClientID: w.Principal.ClientID,
			},
			PurposeOfUse:   w.PurposeOfUse,
			Session:        w.Session,
			Source:         w.Source,
			URIs:           nilIfEmpty(w.URIs),
			Patients:       nilIfEmpty(w.Patients),
			Digests:        nilIfEmpty(w.Digests),
			DecisionID:     w.DecisionID,
			PolicyRevision: w.PolicyRevision,
			Obligations:    nilIfEmpty(w.Obligations),
			Dev:            w.Dev,
			Keys:           nilIfEmpty(keys),
		},
		EventID:  w.EventID,
		Seq:      w.Seq,
		Time:     t.UTC(),
		Node:     w.Node,
		PrevHash: w.PrevHash,
	}
	if !bytes.Equal(Encode(r), b) {
		return Record{}, fmt.Errorf("%w: bytes differ from the canonical encoding of the record they describe", ErrNonCanonical)
	}
	r.Hash = HashRecord(b)
	return r, nil
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

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
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
