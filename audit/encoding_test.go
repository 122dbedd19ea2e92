package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
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
		r := Record{
			Entry: Entry{
				Action: str(), Outcome: str(), Reason: str(),
				Principal:    Principal{Sub: str(), Roles: list(), ClientID: str()},
				PurposeOfUse: str(), Session: str(), Source: str(),
				URIs: list(), Patients: list(), Digests: list(),
				DecisionID: str(), PolicyRevision: str(), Obligations: list(),
				Dev: rng.IntN(2) == 1,
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
	r := goldenRecords[0].rec
	r.Reason = "a\xffb"
	b := Encode(r)
	if !utf8.Valid(b) || !bytes.Contains(b, []byte(`"reason":"a`+"\uFFFD"+`b"`)) {
		t.Fatalf("invalid UTF-8 not replaced: %q", b)
	}
}

func TestEncodeNonUTCTime(t *testing.T) {
	r := goldenRecords[0].rec
	want := Encode(r)
	r.Time = r.Time.In(time.FixedZone("X", 5*3600))
	if got := Encode(r); !bytes.Equal(got, want) {
		t.Errorf("Encode depends on the time's location:\n%s\n%s", got, want)
	}
}

// TestDecodeRejects lists byte sequences that describe a record but are not
// its canonical encoding. Each must fail with ErrNonCanonical.
func TestDecodeRejects(t *testing.T) {
	canon := string(Encode(goldenRecords[1].rec))
	minimal := string(Encode(goldenRecords[0].rec))
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
		{"version 2", rep(canon, `"v":1`, `"v":2`)},
		{"version float", rep(canon, `"v":1`, `"v":1.0`)},
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
		{"uppercase hex escape", strings.Replace(string(Encode(goldenRecords[2].rec)), `\u001f`, `\u001F`, 1)},
		{"raw control char", strings.Replace(string(Encode(goldenRecords[2].rec)), `\u0001`, "\x01", 1)},
		{"long escape for newline", strings.Replace(string(Encode(goldenRecords[2].rec)), `\n`, `\u000a`, 1)},
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
			if c.in == canon {
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
		r2, err := Decode(Encode(r))
		if err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("second round trip: %v", err)
		}
	})
}

// TestFuzzCorpusPresent makes sure the committed seed corpus is there (the
// seeds run as ordinary tests through FuzzDecode).
func TestFuzzCorpusPresent(t *testing.T) {
	ents, err := os.ReadDir(filepath.Join("testdata", "fuzz", "FuzzDecode"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) < 5 {
		t.Fatalf("seed corpus has %d files, want >= 5", len(ents))
	}
}

func TestHashRecordFormula(t *testing.T) {
	// The formula, spelled out with the standard library.
	canon := Encode(goldenRecords[0].rec)
	sum := sha256.Sum256(append([]byte("custos/audit/v1\n"), canon...))
	if got, want := HashRecord(canon), hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("HashRecord = %s, want %s", got, want)
	}
	if HashRecord([]byte("x")) == HashRecord([]byte("y")) {
		t.Fatal("HashRecord ignores its input")
	}
}
