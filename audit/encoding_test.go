package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
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
// exactly the same bytes, and its hash is HashRecord of those bytes.
func FuzzDecode(f *testing.F) {
	for _, g := range goldenRecords {
		f.Add(Encode(g.rec))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
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
