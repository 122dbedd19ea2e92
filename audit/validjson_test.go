package audit

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// validJSON is a fast path of encoding/json.Valid, the reference here.

// serverInput is shaped like the decision inputs the server records: a
// principal with a care team of n patients (pseudonyms), then the request.
func serverInput(n int) []byte {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = fmt.Sprintf("%q", strings.Repeat(fmt.Sprintf("%x", i%16), 64))
	}
	return []byte(`{"principal":{"sub":"dr.alice","roles":["clinician","sensitive:hiv"],"client_id":"assistant","tenant":"general-hospital","patients":[` +
		strings.Join(ps, ",") + `]},"purpose_of_use":"TREAT","action":"read","resource":{"uri":"custos://general-hospital/note/7d1a","type":"note","patient":"7d1a","tenant":"general-hospital","sensitivity":["vip"],"consent":[]},"break_glass":{"grant":"g-1","patient":"7d1a","reason":"caf\u00e9 \"quoted\" \\ \t"}}`)
}

func nested(depth int, open, close string) []byte {
	return []byte(strings.Repeat(open, depth) + "1" + strings.Repeat(close, depth))
}

func TestValidJSONAgreesWithEncodingJSON(t *testing.T) {
	cases := [][]byte{
		nil, []byte(""), []byte(" "), []byte("{}"), []byte("[]"), []byte(`""`), []byte("0"), []byte("-0"),
		[]byte("01"), []byte("-"), []byte("1."), []byte("1e"), []byte("1E+2"), []byte(".5"), []byte("+1"),
		[]byte(`"\u00e9"`), []byte(`"\u00g9"`), []byte(`"\ud800"`), []byte("\"\xff\xfe\""), []byte("\"a\x01\""),
		[]byte(`"\x"`), []byte(`[1,]`), []byte(`{"a":1,}`), []byte(`{"a"}`), []byte(`{1:2}`), []byte(`nul`),
		[]byte(`true false`), []byte(" \t\r\n[true , null ,false]\n"), []byte("\v1"), []byte("\x00"),
		[]byte(`{"a":[{"b":null}]}`), []byte(`[` + strings.Repeat(`"x",`, 1000) + `"x"]`),
		serverInput(0), serverInput(100), serverInput(400), // 400: past fastValidMax, the encoding/json path
		// Nesting: encoding/json accepts 10,000 levels and no more; inputs
		// deep enough to differ are longer than fastValidMax.
		nested(100, "[", "]"), nested(9999, "[", "]"), nested(10000, "[", "]"), nested(10001, "[", "]"),
		nested(10000, `{"a":`, "}"), nested(10001, `{"a":`, "}"), nested(30000, "[", "]"),
		[]byte(strings.Repeat("[", fastValidMax)), []byte(strings.Repeat("[", fastValidMax+1)),
	}
	// Every prefix and single-byte change of a server input: the shapes the
	// fast path sees, broken everywhere.
	in := serverInput(3)
	for i := range in {
		cases = append(cases, in[:i])
		for _, c := range []byte{'"', '\\', '{', '}', '[', ']', ',', ':', ' ', 'x', '0', 0x1f, 0xff} {
			b := []byte(string(in))
			b[i] = c
			cases = append(cases, b)
		}
	}
	rng := rand.New(rand.NewPCG(17, 17))
	for range 20000 {
		b := []byte(string(serverInput(1 + rng.IntN(4))))
		for range 1 + rng.IntN(3) {
			b[rng.IntN(len(b))] = byte(rng.IntN(256))
		}
		cases = append(cases, b)
	}
	fast, slow := 0, 0
	for _, c := range cases {
		if want := json.Valid(c); validJSON(c) != want {
			t.Fatalf("validJSON(%.80q… %d bytes) = %v, encoding/json.Valid = %v", c, len(c), !want, want)
		}
		if len(c) <= fastValidMax {
			fast++
		} else {
			slow++
		}
	}
	if fast == 0 || slow == 0 {
		t.Fatalf("cases on the fast path %d, on the encoding/json path %d: want both", fast, slow)
	}
	// The bound is what keeps the deep-nesting difference out of reach.
	if deep := nested(10001, "[", "]"); len(deep) <= fastValidMax {
		t.Fatalf("10,001 levels fit in %d bytes, within fastValidMax %d", len(deep), fastValidMax)
	}
}

func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{`{}`, `"\ud800"`, "\"\xff\"", `01`, `[1,]`, string(serverInput(2)), string(nested(50, "[", "]"))} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, encoding/json.Valid = %v", b, got, want)
		}
	})
}

// BenchmarkValidateInput: the check Append makes of every decision input,
// on the server's input with a care team of 100 patients, against
// encoding/json.Valid, the reference.
func BenchmarkValidateInput(b *testing.B) {
	in := serverInput(100)
	for _, tc := range []struct {
		name  string
		valid func([]byte) bool
	}{{"validJSON", validJSON}, {"encoding-json", json.Valid}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				if !tc.valid(in) {
					b.Fatal("invalid")
				}
			}
		})
	}
}
