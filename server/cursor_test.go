package server

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/policy"
)

var (
	testKey   = bytes.Repeat([]byte{7}, 32)
	testNonce = bytes.Repeat([]byte{1}, 12)
	testNow   = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
)

func testBinding(sub string) []byte {
	return cursorBinding(Identity{Principal: policy.Principal{Sub: sub, Tenant: "t", ClientID: "c"}, PurposeOfUse: "TREAT"})
}

func TestCursorRoundTripAndBinding(t *testing.T) {
	st := cursorState{After: "fhir://t/patients/x", IAT: testNow.Unix()}
	c, err := sealCursor(testKey, testBinding("alice"), testNonce, st)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(c, "fhir") {
		t.Fatal("cursor leaks its position")
	}
	got, err := openCursor(testKey, testBinding("alice"), c, testNow.Add(time.Minute))
	if err != nil || got != st {
		t.Fatalf("open own cursor: %+v, %v", got, err)
	}
	cases := map[string]func() error{
		"other principal": func() error { _, err := openCursor(testKey, testBinding("bob"), c, testNow); return err },
		"other key": func() error {
			_, err := openCursor(bytes.Repeat([]byte{8}, 32), testBinding("alice"), c, testNow)
			return err
		},
		"expired": func() error {
			_, err := openCursor(testKey, testBinding("alice"), c, testNow.Add(2*time.Hour))
			return err
		},
		"from future": func() error {
			_, err := openCursor(testKey, testBinding("alice"), c, testNow.Add(-time.Hour))
			return err
		},
		"no prefix":   func() error { _, err := openCursor(testKey, testBinding("alice"), c[3:], testNow); return err },
		"bit flipped": func() error { _, err := openCursor(testKey, testBinding("alice"), flip(c), testNow); return err },
		"too long": func() error {
			_, err := openCursor(testKey, testBinding("alice"), c+strings.Repeat("A", 2000), testNow)
			return err
		},
		"not base64":   func() error { _, err := openCursor(testKey, testBinding("alice"), "c1.!!!", testNow); return err },
		"short cipher": func() error { _, err := openCursor(testKey, testBinding("alice"), "c1.AAAA", testNow); return err },
	}
	for name, fn := range cases {
		if err := fn(); err == nil {
			t.Errorf("%s: cursor opened", name)
		} else if !strings.Contains(err.Error(), "invalid cursor") {
			t.Errorf("%s: error %q does not say the cursor is invalid", name, err)
		}
	}
}

func flip(c string) string {
	b := []byte(c)
	i := len(b) / 2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// FuzzOpenCursor: no input opens unless it was sealed with the key for this
// binding, and nothing panics.
func FuzzOpenCursor(f *testing.F) {
	good, _ := sealCursor(testKey, testBinding("alice"), testNonce, cursorState{After: "a", IAT: testNow.Unix()})
	f.Add(good)
	f.Add("c1.")
	f.Add("")
	f.Add("not-a-cursor")
	f.Add(flip(good))
	f.Fuzz(func(t *testing.T, s string) {
		st, err := openCursor(testKey, testBinding("alice"), s, testNow)
		if err == nil && s != good {
			t.Fatalf("forged cursor %q opened to %+v", s, st)
		}
	})
}
