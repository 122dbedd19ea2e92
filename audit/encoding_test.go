package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("aZ09 \"\\/\n\t\x00\x1f\x7f<>&é日🩺\u2028")
	str := func() string {
		n := rng.IntN(8)
		var sb strings.Builder
		for range n {
			sb.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		return sb.String()
	}
	list := func() []string {
		n := rng.IntN(4)
		if n == 0 {
			return nil
		}
		out := make([]string, n)
		for i := range out {
			out[i] = str()
		}
		return out
	}
	for i := 0; i < 500; i++ {
		v := FormatVersion1 + rng.IntN(2)
		var keys []string
		if v == FormatVersion2 {
			keys = list()
			for j := range keys {
				keys[j] = fmt.Sprintf("%d=%s", j, keys[j]) // non-empty, strictly increasing
			}
		}
		r := Record{
			V: v,
			Entry: Entry{
				Action: str(), Outcome: str(), Reason: str(),
				Principal:    Principal{Sub: str(), Roles: list(), ClientID: str()},
				PurposeOfUse: str(), Session: str(), Source: str(),
				URIs: list(), Patients: list(), Digests: list(),
				DecisionID: str(), PolicyRevision: str(), Obligations: list(),
				Dev: rng.IntN(2) == 1, Keys: keys,
			},
			EventID:  str(),
			Seq:      rng.Uint64(),
			Time:     time.Unix(rng.Int64N(253402300799), rng.Int64N(1e9)).UTC(),
			Node:     str(),
			PrevHash: HashRecord([]byte(str())),
		}
		b := Encode(r)
		if !utf8.Valid(b) {
			t.Fatalf("Encode produced invalid UTF-8: %q", b)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode(Encode(r)): %v\n%s", err, b)
		}
		r.Hash = HashRecord(b)
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, r)
		}
	}
}

func TestEncodeInvalidUTF8(t *testing.T) {
	r := golden(t, "minimal")
	r.Reason = "a\xffb"
	b := Encode(r)
	if !utf8.Valid(b) || !bytes.Contains(b, []byte(`"reason":"a`+"\uFFFD"+`b"`)) {
		t.Fatalf("invalid UTF-8 not replaced: %q", b)
	}
}

// TestEncodeVersionLayout: r.V selects the layout. A v1 record has no keys
// field (Keys cannot be represented in v1 and are not encoded); every other
// version has one, an array even when Keys is nil.
func TestEncodeVersionLayout(t *testing.T) {
	r := golden(t, "minimal")
	r.Keys = []string{"cursor=dev:ephemeral"}
	if b := Encode(r); bytes.Contains(b, []byte(`"keys"`)) || !bytes.HasPrefix(b, []byte(`{"v":1,`)) {
		t.Errorf("v1 encoding: %s", b)
	}
	r.V = FormatVersion2
	if b := Encode(r); !bytes.Contains(b, []byte(`"dev":false,"keys":["cursor=dev:ephemeral"],"prev_hash":`)) || !bytes.HasPrefix(b, []byte(`{"v":2,`)) {
		t.Errorf("v2 encoding: %s", b)
	}
	r.Keys = nil
	if b := Encode(r); !bytes.Contains(b, []byte(`"keys":[]`)) {
		t.Errorf("v2 encoding of nil Keys: %s", b)
	}
	// Encode is total: an unknown version is written as given, and Decode
	// refuses it.
	for _, v := range []int{0, 3, -1} {
		r.V = v
		b := Encode(r)
		if !bytes.HasPrefix(b, []byte(fmt.Sprintf(`{"v":%d,`, v))) {
			t.Errorf("Encode(V=%d) = %s", v, b)
		}
		if _, err := Decode(b); !errors.Is(err, ErrNonCanonical) {
			t.Errorf("Decode(V=%d) = %v, want ErrNonCanonical", v, err)
		}
	}
}

func TestDecodeVersions(t *testing.T) {
	cases := []struct {
		name string
		v    int
		keys []string
	}{
		{"minimal", FormatVersion1, nil},
		{"v2-minimal", FormatVersion2, nil},
		{"v2-full", FormatVersion2, []string{"audit-hmac=secret/custos/audit-hmac-key@2", "blob-kek=transit/custos-blob-kek@1", "cursor=secret/custos/cursor-key@3"}},
	}
	for _, c := range cases {
		r, err := Decode(Encode(golden(t, c.name)))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if r.V != c.v || !reflect.DeepEqual(r.Keys, c.keys) {
			t.Errorf("%s: V=%d Keys=%q, want V=%d Keys=%q", c.name, r.V, r.Keys, c.v, c.keys)
		}
	}
}

func TestEncodeNonUTCTime(t *testing.T) {
	r := golden(t, "v2-full")
	want := Encode(r)
	r.Time = r.Time.In(time.FixedZone("X", 5*3600))
	if got := Encode(r); !bytes.Equal(got, want) {
		t.Errorf("Encode depends on the time's location:\n%s\n%s", got, want)
	}
}

// TestDecodeRejects lists byte sequences that describe a record but are not
// its canonical encoding. Each must fail with ErrNonCanonical.
func TestDecodeRejects(t *testing.T) {
	canon := string(Encode(golden(t, "full")))
	minimal := string(Encode(golden(t, "minimal")))
	canon2 := string(Encode(golden(t, "v2-full")))
	minimal2 := string(Encode(golden(t, "v2-minimal")))
	const vaultKeys = `"keys":["audit-hmac=secret/custos/audit-hmac-key@2","blob-kek=transit/custos-blob-kek@1","cursor=secret/custos/cursor-key@3"]`
	rep := func(s, old, new string) string {
		if !strings.Contains(s, old) {
			t.Fatalf("test bug: %q not in %s", old, s)
		}
		return strings.Replace(s, old, new, 1)
	}
	cases := []struct{ name, in string }{
		{"empty", ""},
		{"not json", "hello"},
		{"array", "[]"},
		{"empty object", "{}"},
		{"trailing newline", canon + "\n"},
		{"leading space", " " + canon},
		{"space after colon", rep(canon, `"seq":42`, `"seq": 42`)},
		{"trailing data", canon + "{}"},
		{"unknown field", rep(canon, `"v":1,`, `"v":1,"x":1,`)},
		{"missing field", rep(canon, `"reason":"clinician_care_team",`, ``)},
		{"duplicate field", rep(canon, `"v":1,`, `"v":1,"v":1,`)},
		{"reordered", rep(canon, `"node":"node-b","action":"resources/read"`, `"action":"resources/read","node":"node-b"`)},
		{"upper-case key", rep(canon, `"seq"`, `"SEQ"`)},
		{"v2 without keys", rep(canon, `"v":1`, `"v":2`)},
		{"v1 with keys", rep(canon2, `"v":2`, `"v":1`)},
		{"v1 with empty keys", rep(minimal2, `"v":2`, `"v":1`)},
		{"version 0", rep(canon, `"v":1`, `"v":0`)},
		{"version 3", rep(canon2, `"v":2`, `"v":3`)},
		{"version negative", rep(canon, `"v":1`, `"v":-1`)},
		{"version missing", rep(canon2, `"v":2,`, ``)},
		{"version float", rep(canon, `"v":1`, `"v":1.0`)},
		{"version string", rep(canon2, `"v":2`, `"v":"2"`)},
		{"version leading zero", rep(canon2, `"v":2`, `"v":02`)},
		{"keys null", rep(minimal2, `"keys":[]`, `"keys":null`)},
		{"keys object", rep(minimal2, `"keys":[]`, `"keys":{}`)},
		{"keys string", rep(minimal2, `"keys":[]`, `"keys":"cursor=dev:ephemeral"`)},
		{"keys numbers", rep(minimal2, `"keys":[]`, `"keys":[1]`)},
		{"keys empty string", rep(minimal2, `"keys":[]`, `"keys":[""]`)},
		{"keys empty string first", rep(minimal2, `"keys":[]`, `"keys":["","cursor=dev:ephemeral"]`)},
		{"keys unsorted", rep(canon2, vaultKeys, `"keys":["cursor=secret/custos/cursor-key@3","audit-hmac=secret/custos/audit-hmac-key@2"]`)},
		{"keys duplicate", rep(canon2, vaultKeys, `"keys":["cursor=dev:ephemeral","cursor=dev:ephemeral"]`)},
		{"keys before dev", rep(canon2, `"dev":false,`+vaultKeys, vaultKeys+`,"dev":false`)},
		{"keys after prev_hash", rep(minimal2, `"keys":[],"prev_hash":"`+ZeroHash+`"`, `"prev_hash":"`+ZeroHash+`","keys":[]`)},
		{"keys duplicated field", rep(minimal2, `"keys":[]`, `"keys":[],"keys":[]`)},
		{"keys escaped slash", rep(canon2, `secret/custos/cursor-key@3`, `secret\/custos/cursor-key@3`)},
		{"keys space", rep(canon2, `"keys":[`, `"keys": [`)},
		{"keys invalid utf8", rep(canon2, `cursor=secret`, "cursor=s\xffcret")},
		{"seq float", rep(canon, `"seq":42`, `"seq":42.0`)},
		{"seq exponent", rep(canon, `"seq":42`, `"seq":4.2e1`)},
		{"seq leading zero", rep(canon, `"seq":42`, `"seq":042`)},
		{"seq negative", rep(canon, `"seq":42`, `"seq":-42`)},
		{"seq string", rep(canon, `"seq":42`, `"seq":"42"`)},
		{"seq overflow", rep(canon, `"seq":42`, `"seq":18446744073709551616`)},
		{"dev string", rep(canon, `"dev":true`, `"dev":"true"`)},
		{"dev number", rep(canon, `"dev":true`, `"dev":1`)},
		{"null list", rep(minimal, `"uris":[]`, `"uris":null`)},
		{"null string", rep(minimal, `"reason":""`, `"reason":null`)},
		{"null principal", rep(minimal, `"principal":{"sub":"","roles":[],"client_id":""}`, `"principal":null`)},
		{"list of numbers", rep(minimal, `"uris":[]`, `"uris":[1]`)},
		{"escaped slash", rep(canon, `phi://`, `phi:\/\/`)},
		{"unicode escape of ascii", rep(canon, `"node-b"`, `"\u006eode-b"`)},
		{"html escape", rep(canon, `"resources/read"`, `"resources\u002fread"`)},
		{"uppercase hex escape", strings.Replace(string(Encode(golden(t, "unicode"))), `\u001f`, `\u001F`, 1)},
		{"raw control char", strings.Replace(string(Encode(golden(t, "unicode"))), `\u0001`, "\x01", 1)},
		{"long escape for newline", strings.Replace(string(Encode(golden(t, "unicode"))), `\n`, `\u000a`, 1)},
		{"invalid utf8", rep(canon, `node-b`, "node-\xff")},
		{"time offset", rep(canon, `09:30:01.123456789Z`, `10:30:01.123456789+01:00`)},
		{"time millis", rep(canon, `09:30:01.123456789Z`, `09:30:01.123Z`)},
		{"time no fraction", rep(minimal, `09:30:00.000000000Z`, `09:30:00Z`)},
		{"time lowercase z", rep(canon, `09:30:01.123456789Z`, `09:30:01.123456789z`)},
		{"prev_hash uppercase", rep(canon, `5e884898da`, `5E884898DA`)},
		{"prev_hash short", rep(canon, `5e884898da`, `5e884898d`)},
		{"prev_hash empty", rep(minimal, ZeroHash, ``)},
		{"prev_hash long", rep(minimal, ZeroHash, ZeroHash+`0`)},
		{"prev_hash escaped digit", rep(minimal, `"`+ZeroHash, `"\u0030`+ZeroHash[1:])},
		{"prev_hash number", rep(minimal, `"`+ZeroHash+`"`, `0`)},
		{"truncated", canon[:len(canon)-1]},
		{"truncated in string", canon[:strings.Index(canon, "node-b")+3]},
		{"truncated after escape", strings.SplitAfter(string(Encode(golden(t, "unicode"))), `\`)[0]},
		{"truncated in u escape", strings.SplitAfter(string(Encode(golden(t, "unicode"))), `\u00`)[0]},
		{"nested object", rep(minimal, `"reason":""`, `"reason":{}`)},
		{"principal reordered", rep(canon, `{"sub":"dr.house@example.org","roles":["clinician","attending"]`, `{"roles":["clinician","attending"],"sub":"dr.house@example.org"`)},
		{"principal extra field", rep(minimal, `"client_id":""}`, `"client_id":"","x":""}`)},
		{"list trailing comma", rep(canon, `"attending"]`, `"attending",]`)},
		{"list leading comma", rep(canon, `["clinician"`, `[,"clinician"`)},
		{"list missing comma", rep(canon, `"clinician","attending"`, `"clinician""attending"`)},
		{"list space", rep(canon, `"clinician","attending"`, `"clinician", "attending"`)},
		{"list nested", rep(minimal, `"uris":[]`, `"uris":[[]]`)},
		{"list unterminated", rep(minimal, `"uris":[]`, `"uris":[`)},
		{"dev True", rep(canon, `"dev":true`, `"dev":True`)},
		{"dev truth", rep(canon, `"dev":true`, `"dev":truth`)},
		{"dev fals", rep(minimal, `"dev":false`, `"dev":fals`)},
		{"short escape as unicode tab", strings.Replace(string(Encode(golden(t, "unicode"))), `\t`, `\u0009`, 1)},
		{"unicode escape of backspace", strings.Replace(string(Encode(golden(t, "unicode"))), `\b`, `\u0008`, 1)},
		{"unicode escape of quote", rep(canon, `"node-b"`, `"node\u0022b"`)},
		{"unicode escape of space", rep(canon, `"node-b"`, `"node\u0020b"`)},
		{"unicode escape of del", strings.Replace(string(Encode(golden(t, "unicode"))), "\x7f", `\u007f`, 1)},
		{"unicode escape of non-ascii", rep(canon, `"node-b"`, `"node-\u00e9"`)},
		{"surrogate escape", rep(canon, `"node-b"`, `"node-\ud83e\ude7a"`)},
		{"escaped bad hex", strings.Replace(string(Encode(golden(t, "unicode"))), `\u001f`, `\u001g`, 1)},
		{"escape x", rep(canon, `"node-b"`, `"node\x41"`)},
		{"escape single quote", rep(canon, `"node-b"`, `"node\'b"`)},
		{"encoded surrogate", rep(canon, `node-b`, "node-\xed\xa0\x80")},
		{"overlong utf8", rep(canon, `node-b`, "node-\xc0\xaf")},
		{"truncated utf8", rep(canon, `node-b`, "node-\xe6\x97")},
		{"invalid utf8 after escape", strings.Replace(string(Encode(golden(t, "unicode"))), `\n`, "\\n\xff", 1)},
		{"time day 31 in november", rep(canon, `2026-11-21`, `2026-11-31`)},
		{"time feb 29 non leap", rep(canon, `2026-11-21`, `2026-02-29`)},
		{"time feb 29 1900", rep(canon, `2026-11-21`, `1900-02-29`)},
		{"time month 13", rep(canon, `2026-11-21`, `2026-13-21`)},
		{"time month 0", rep(canon, `2026-11-21`, `2026-00-21`)},
		{"time day 0", rep(canon, `2026-11-21`, `2026-11-00`)},
		{"time hour 24", rep(canon, `T09:30:01`, `T24:30:01`)},
		{"time minute 60", rep(canon, `T09:30:01`, `T09:60:01`)},
		{"time second 60", rep(canon, `T09:30:01`, `T09:30:60`)},
		{"time comma", rep(canon, `01.123456789Z`, `01,123456789Z`)},
		{"time ten digits", rep(canon, `01.123456789Z`, `01.1234567890Z`)},
		{"time space", rep(canon, `T09:30`, ` 09:30`)},
		{"time escaped Z", rep(canon, `123456789Z`, `123456789\u005a`)},
		{"time five-digit year", rep(canon, `2026-11-21`, `12026-11-21`)},
		{"time number", rep(canon, `"2026-11-21T09:30:01.123456789Z"`, `20261121`)},
		{"seq empty", rep(canon, `"seq":42`, `"seq":`)},
		{"seq plus", rep(canon, `"seq":42`, `"seq":+42`)},
		{"seq hex", rep(canon, `"seq":42`, `"seq":0x2a`)},
		{"seq zero leading zero", rep(canon, `"seq":42`, `"seq":00`)},
		{"seq huge", rep(canon, `"seq":42`, `"seq":99999999999999999999999`)},
		{"seq max plus one digit", rep(canon, `"seq":42`, `"seq":184467440737095516150`)},
		{"version 10", rep(canon2, `"v":2`, `"v":10`)},
		{"version 21", rep(canon2, `"v":2`, `"v":21`)},
		{"v2 keys after prev_hash position", rep(canon2, `,"prev_hash"`, `,"keys":[],"prev_hash"`)},
		{"object closed twice", canon + "}"},
		{"object not closed", canon[:len(canon)-1] + ","},
		{"nul byte after", canon + "\x00"},
		{"bom", "\ufeff" + canon},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.in == canon || c.in == canon2 {
				t.Fatal("test bug: input is canonical")
			}
			_, err := Decode([]byte(c.in))
			if !errors.Is(err, ErrNonCanonical) {
				t.Fatalf("Decode = %v, want ErrNonCanonical", err)
			}
		})
	}
}

// FuzzDecode checks non-malleability: any input Decode accepts re-encodes to
// exactly the same bytes, and its hash is HashRecord of those bytes. It also
// checks the hand-written parser against decodeReference (the encoding/json
// decoder it replaced): on every input both accept or both reject, and when
// they accept they return the same Record.
func FuzzDecode(f *testing.F) {
	for _, g := range goldenRecords {
		f.Add(Encode(g.rec))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecodeAgainstReference(t, b)
		r, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrNonCanonical) {
				t.Fatalf("Decode error %v does not wrap ErrNonCanonical", err)
			}
			return
		}
		if got := Encode(r); !bytes.Equal(got, b) {
			t.Fatalf("Decode accepted non-canonical bytes:\n in %q\nout %q", b, got)
		}
		if r.Hash != HashRecord(b) {
			t.Fatalf("Hash = %s, want %s", r.Hash, HashRecord(b))
		}
		switch {
		case r.V == FormatVersion1 && r.Keys != nil:
			t.Fatalf("v1 record decoded with keys %q", r.Keys)
		case r.V != FormatVersion1 && r.V != FormatVersion2:
			t.Fatalf("Decode accepted version %d", r.V)
		case checkKeys(r.Keys) != nil:
			t.Fatalf("Decode accepted keys %q: %v", r.Keys, checkKeys(r.Keys))
		}
		r2, err := Decode(Encode(r))
		if err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("second round trip: %v", err)
		}
	})
}

// checkDecodeAgainstReference fails t unless Decode and decodeReference
// agree on b: both reject it (Decode with ErrNonCanonical), or both accept
// it with deeply equal records.
func checkDecodeAgainstReference(t testing.TB, b []byte) {
	t.Helper()
	got, err := Decode(b)
	want, refErr := decodeReference(b)
	switch {
	case err != nil && !errors.Is(err, ErrNonCanonical):
		t.Fatalf("Decode error %v does not wrap ErrNonCanonical\n in %q", err, b)
	case (err == nil) != (refErr == nil):
		t.Fatalf("Decode and the reference decoder disagree:\n in %q\nDecode: %v\nreference: %v", b, err, refErr)
	case err == nil && !reflect.DeepEqual(got, want):
		t.Fatalf("Decode and the reference decoder decode differently:\n in %q\n got %#v\nwant %#v", b, got, want)
	}
}

// TestDecodeMatchesReference runs the differential check of FuzzDecode
// deterministically on every golden vector and on systematic mutations of
// each: every byte deleted, replaced by each of a set of bytes that matter
// to the grammar, and each of those bytes inserted before it.
func TestDecodeMatchesReference(t *testing.T) {
	subst := []byte{'"', '\\', ',', ':', '[', ']', '{', '}', ' ', '0', '1', '9', 'a', 'f', 'u', 'Z', 0x00, 0x1f, 0x7f, 0xc3, 0xff}
	for _, g := range goldenRecords {
		canon := Encode(g.rec)
		checkDecodeAgainstReference(t, canon)
		buf := make([]byte, 0, len(canon)+1)
		for i := range canon {
			checkDecodeAgainstReference(t, append(append(buf[:0], canon[:i]...), canon[i+1:]...))
			for _, c := range subst {
				if c != canon[i] {
					buf = append(buf[:0], canon...)
					buf[i] = c
					checkDecodeAgainstReference(t, buf)
				}
				checkDecodeAgainstReference(t, append(append(append(buf[:0], canon[:i]...), c), canon[i:]...))
			}
		}
		for i := 0; i <= len(canon); i++ {
			checkDecodeAgainstReference(t, canon[:i])
		}
	}
}

// TestDecodeTimesMatchReference checks the parser's date validation (month
// lengths, leap years, ranges, year 0000) against time.Parse through the
// reference decoder, on a grid of time strings around the edges.
func TestDecodeTimesMatchReference(t *testing.T) {
	canon := string(Encode(golden(t, "v2-dev")))
	const orig = "2026-11-22T00:00:00.000000001Z"
	if !strings.Contains(canon, orig) {
		t.Fatal("test bug: time not found")
	}
	accepted := 0
	for _, y := range []string{"0000", "0004", "0100", "0400", "1900", "1970", "2000", "2024", "2026", "2100", "9999", "-001", "20a6"} {
		for _, m := range []string{"00", "01", "02", "04", "06", "09", "11", "12", "13", "1", "x1"} {
			for _, d := range []string{"00", "01", "28", "29", "30", "31", "32", "99"} {
				for _, hms := range []string{"00:00:00.000000000", "23:59:59.999999999", "24:00:00.000000000", "12:60:00.000000000", "12:00:60.000000000", "12:00:00,000000000", "9:00:00.0000000000", "12:00:00.00000000a"} {
					ts := y + "-" + m + "-" + d + "T" + hms + "Z"
					in := []byte(strings.Replace(canon, orig, ts, 1))
					checkDecodeAgainstReference(t, in)
					if _, err := Decode(in); err == nil {
						accepted++
					}
				}
			}
		}
	}
	// Independently: valid years x valid months x listed days that exist
	// in that month (per time.Date's normalization) x the two valid times.
	want := 0
	for _, y := range []int{0, 4, 100, 400, 1900, 1970, 2000, 2024, 2026, 2100, 9999} {
		for _, m := range []int{1, 2, 4, 6, 9, 11, 12} {
			last := time.Date(y, time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC).Day()
			for _, d := range []int{1, 28, 29, 30, 31} {
				if d <= last {
					want += 2
				}
			}
		}
	}
	if accepted != want {
		t.Fatalf("%d time strings accepted, want %d", accepted, want)
	}
}

// TestDecodeAcceptsEdges: canonical encodings at the edges of the grammar
// decode (each is also checked against the reference decoder).
func TestDecodeAcceptsEdges(t *testing.T) {
	base := golden(t, "v2-full")
	var allCtl strings.Builder
	for c := rune(0); c < 0x20; c++ {
		allCtl.WriteRune(c)
	}
	cases := map[string]func(r *Record){
		"seq 0":              func(r *Record) { r.Seq = 0 },
		"seq 9":              func(r *Record) { r.Seq = 9 },
		"seq 10":             func(r *Record) { r.Seq = 10 },
		"seq max":            func(r *Record) { r.Seq = math.MaxUint64 },
		"year 0":             func(r *Record) { r.Time = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC) },
		"leap day 2000":      func(r *Record) { r.Time = time.Date(2000, 2, 29, 23, 59, 59, 999999999, time.UTC) },
		"every control char": func(r *Record) { r.Reason = allCtl.String() },
		"escapes only":       func(r *Record) { r.Node = "\"\\\b\t\n\f\r" },
		"escape then utf8":   func(r *Record) { r.Action = "\n\u00e9\U0001fa7a\x7f\u2028" },
		"replacement char":   func(r *Record) { r.Principal.Sub = "\uFFFD" },
		"empty strings":      func(r *Record) { r.Principal.Roles = []string{"", "", ""} },
		"escaped list":       func(r *Record) { r.URIs = []string{"a\"b", "\\", "\x00"} },
		"many list elements": func(r *Record) { r.Patients = strings.Split(strings.Repeat("p,", 99)+"p", ",") },
		"one key":            func(r *Record) { r.Keys = []string{"\x00"} },
		"v1":                 func(r *Record) { r.V, r.Keys = FormatVersion1, nil },
	}
	for name, mut := range cases {
		t.Run(name, func(t *testing.T) {
			r := base
			mut(&r)
			b := Encode(r)
			got, err := Decode(b)
			if err != nil {
				t.Fatalf("Decode: %v\n%q", err, b)
			}
			r.Hash = HashRecord(b)
			if !reflect.DeepEqual(got, r) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, r)
			}
			checkDecodeAgainstReference(t, b)
		})
	}
}

// TestDecodeDoesNotAlias: the decoded record does not share memory with the
// input (the caller may pass a bbolt page or a reused buffer), and its lists
// are capped so that appending to one does not overwrite the next.
func TestDecodeDoesNotAlias(t *testing.T) {
	want := golden(t, "v2-full")
	b := Encode(want)
	want.Hash = HashRecord(b)
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 'X'
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("record changed with its input:\n got %#v\nwant %#v", got, want)
	}
	_ = append(got.Principal.Roles, "injected")
	_ = append(got.URIs, "injected")
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("appending to one list changed another:\n got %#v\nwant %#v", got, want)
	}
}

// TestDecodeAllocs pins Decode's allocation budget: one copy of the input
// (shared by every string and the hash), one backing array for the lists,
// and the hash state. Strings with escapes cost one more each.
func TestDecodeAllocs(t *testing.T) {
	for _, c := range []struct {
		name string
		max  float64
	}{{"minimal", 3}, {"full", 3}, {"v2-full", 3}, {"v2-dev", 3}, {"unicode", 3 + 4}} {
		b := Encode(golden(t, c.name))
		n := testing.AllocsPerRun(100, func() {
			if _, err := Decode(b); err != nil {
				t.Fatal(err)
			}
		})
		if n > c.max {
			t.Errorf("%s: Decode makes %.0f allocations, want <= %.0f", c.name, n, c.max)
		}
	}
}

// TestDecodeErrorsOmitContents: a rejection names the position and the rule,
// never the record's contents (the audit log is PHI; verify reports the
// message).
func TestDecodeErrorsOmitContents(t *testing.T) {
	r := golden(t, "v2-full")
	r.Principal.Sub = "SECRET-PATIENT-NAME"
	canon := string(Encode(r))
	for _, in := range []string{
		strings.Replace(canon, "SECRET-PATIENT-NAME", `SECRET-PATIENT-NAME\/`, 1),
		strings.Replace(canon, "SECRET-PATIENT-NAME", "SECRET-PATIENT-NAME\xff", 1),
		strings.Replace(canon, "SECRET-PATIENT-NAME", "SECRET-PATIENT-NAME\x01", 1),
		strings.Replace(canon, `"SECRET-PATIENT-NAME"`, `"SECRET-PATIENT-NAME`, 1),
		canon + "SECRET-PATIENT-NAME",
	} {
		_, err := Decode([]byte(in))
		if !errors.Is(err, ErrNonCanonical) {
			t.Fatalf("Decode = %v, want ErrNonCanonical", err)
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("error reveals contents: %v", err)
		}
	}
}

// FuzzEncodeV2 checks the v2 encoder on arbitrary strings: a record built
// the way Append builds it (keys sorted, deduplicated, non-empty) encodes to
// bytes that Decode accepts and that decode to the same record.
func FuzzEncodeV2(f *testing.F) {
	f.Add("resources/read", "dr.house", "cursor=secret/custos/cursor-key@3", "blob-kek=transit/custos-blob-kek@1", false)
	f.Add("resources/list", "", "cursor=dev:ephemeral", "cursor=dev:ephemeral", true)
	f.Add("x", "\"\\\n\u2028", "k=\x00\x7f", "", false)
	f.Fuzz(func(t *testing.T, action, sub, k1, k2 string, dev bool) {
		if !utf8.ValidString(action) || !utf8.ValidString(sub) || !utf8.ValidString(k1) || !utf8.ValidString(k2) {
			return // Append rejects these
		}
		var keys []string
		for _, k := range []string{k1, k2} {
			if k != "" && !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		r := golden(t, "v2-full")
		r.Action, r.Principal.Sub, r.Dev, r.Keys = action, sub, dev, keys
		b := Encode(r)
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode(Encode(r)): %v\n%q", err, b)
		}
		r.Hash = HashRecord(b)
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, r)
		}
	})
}

// TestFuzzCorpusPresent makes sure the committed seed corpora are there (the
// seeds run as ordinary tests through the fuzz targets), including seeds of
// both format versions.
func TestFuzzCorpusPresent(t *testing.T) {
	for _, c := range []struct {
		target string
		min    int
		need   []string
	}{
		{"FuzzDecode", 5, []string{"golden-minimal", "golden-v2-full", "v1-with-keys", "v2-without-keys", "keys-unsorted"}},
		{"FuzzEncodeV2", 2, nil},
	} {
		dir := filepath.Join("testdata", "fuzz", c.target)
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) < c.min {
			t.Fatalf("%s seed corpus has %d files, want >= %d", c.target, len(ents), c.min)
		}
		for _, n := range c.need {
			if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
				t.Errorf("%s seed %s: %v", c.target, n, err)
			}
		}
	}
}

func TestHashRecordFormula(t *testing.T) {
	// The formula, spelled out with the standard library.
	// The domain separator is the same for both format versions.
	for _, name := range []string{"minimal", "v2-full"} {
		canon := Encode(golden(t, name))
		sum := sha256.Sum256(append([]byte("custos/audit/v1\n"), canon...))
		if got, want := HashRecord(canon), hex.EncodeToString(sum[:]); got != want {
			t.Fatalf("%s: HashRecord = %s, want %s", name, got, want)
		}
	}
	if HashRecord([]byte("x")) == HashRecord([]byte("y")) {
		t.Fatal("HashRecord ignores its input")
	}
}

// decodeReference is the encoding/json-based decoder Decode replaced, kept
// as the reference the hand-written parser is checked against (FuzzDecode,
// TestDecodeMatchesReference): decode with encoding/json, re-encode, and
// require the result to equal the input byte for byte.
func decodeReference(b []byte) (Record, error) {
	var w refWireRecord
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

// refWireRecord is decodeReference's encoding/json target.
type refWireRecord struct {
	V              int              `json:"v"`
	Seq            uint64           `json:"seq"`
	EventID        string           `json:"event_id"`
	Time           string           `json:"time"`
	Node           string           `json:"node"`
	Action         string           `json:"action"`
	Outcome        string           `json:"outcome"`
	Reason         string           `json:"reason"`
	Principal      refWirePrincipal `json:"principal"`
	PurposeOfUse   string           `json:"purpose_of_use"`
	Session        string           `json:"session"`
	Source         string           `json:"source"`
	URIs           []string         `json:"uris"`
	Patients       []string         `json:"patients"`
	Digests        []string         `json:"digests"`
	DecisionID     string           `json:"decision_id"`
	PolicyRevision string           `json:"policy_revision"`
	Obligations    []string         `json:"obligations"`
	Dev            bool             `json:"dev"`
	Keys           *[]string        `json:"keys"` // nil: absent (or null)
	PrevHash       string           `json:"prev_hash"`
}

type refWirePrincipal struct {
	Sub      string   `json:"sub"`
	Roles    []string `json:"roles"`
	ClientID string   `json:"client_id"`
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
