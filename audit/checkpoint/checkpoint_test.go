package checkpoint

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

func TestMarshalParseRoundTrip(t *testing.T) {
	root := tlog.RecordHash([]byte("x"))
	for _, c := range []Checkpoint{
		{Origin: testOrigin, Size: 0, Root: tlog.Hash{}},
		{Origin: testOrigin, Size: 1, Root: root},
		{Origin: "a", Size: 1<<63 - 1, Root: root},
		{Origin: "héllo/ünïcode", Size: 42, Root: root},
	} {
		b := c.Marshal()
		got, err := Parse(b)
		if err != nil {
			t.Fatalf("Parse(%q): %v", b, err)
		}
		if got != c {
			t.Fatalf("round trip: got %+v, want %+v", got, c)
		}
		if !bytes.Equal(got.Marshal(), b) {
			t.Fatalf("re-marshal differs")
		}
	}
	c := Checkpoint{Origin: testOrigin, Size: 7, Root: root}
	want := testOrigin + "\n7\n" + root.String() + "\n"
	if got := string(c.Marshal()); got != want {
		t.Fatalf("Marshal = %q, want %q", got, want)
	}
}

func TestParseRejects(t *testing.T) {
	root := tlog.RecordHash([]byte("x")).String()
	// The zero hash is 43 'A's and '='; the last 'A' carries 2 padding
	// bits, which 'B' sets: decodes to the same bytes, non-canonically.
	nonCanon := strings.Repeat("A", 42) + "B="
	tests := []struct {
		name, text string
	}{
		{"empty", ""},
		{"no final newline", testOrigin + "\n1\n" + root},
		{"two lines", testOrigin + "\n1\n"},
		{"extension line", testOrigin + "\n1\n" + root + "\nextra\n"},
		{"blank extension", testOrigin + "\n1\n" + root + "\n\n"},
		{"empty origin", "\n1\n" + root + "\n"},
		{"origin with space", "custos example\n1\n" + root + "\n"},
		{"origin with plus", "custos+x\n1\n" + root + "\n"},
		{"origin with tab", "custos\tx\n1\n" + root + "\n"},
		{"origin with NBSP", "custos\u00a0x\n1\n" + root + "\n"},
		{"origin invalid utf8", "custos\xff\n1\n" + root + "\n"},
		{"leading zero", testOrigin + "\n01\n" + root + "\n"},
		{"plus sign", testOrigin + "\n+1\n" + root + "\n"},
		{"negative", testOrigin + "\n-1\n" + root + "\n"},
		{"minus zero", testOrigin + "\n-0\n" + root + "\n"},
		{"empty size", testOrigin + "\n\n" + root + "\n"},
		{"hex size", testOrigin + "\n0x1\n" + root + "\n"},
		{"size overflow", testOrigin + "\n9223372036854775808\n" + root + "\n"},
		{"size space", testOrigin + "\n 1\n" + root + "\n"},
		{"short root", testOrigin + "\n1\n" + root[:40] + "\n"},
		{"long root", testOrigin + "\n1\nAAAA" + root + "\n"},
		{"unpadded root", testOrigin + "\n1\n" + strings.TrimRight(root, "=") + "\n"},
		{"urlsafe root", testOrigin + "\n1\n" + strings.NewReplacer("+", "-", "/", "_").Replace(tlog.Hash{0xfb, 0xff}.String()) + "\n"},
		{"non-canonical root bits", testOrigin + "\n1\n" + nonCanon + "\n"},
		{"CRLF", testOrigin + "\r\n1\r\n" + root + "\r\n"},
		{"too large", strings.Repeat("a", MaxCheckpointSize) + "\n1\n" + root + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.text))
			if !errors.Is(err, ErrBadCheckpoint) {
				t.Fatalf("Parse(%q) = %+v, %v; want ErrBadCheckpoint", tt.text, c, err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	if err := (Checkpoint{Origin: testOrigin, Size: -1}).Validate(); !errors.Is(err, ErrBadCheckpoint) {
		t.Fatalf("negative size: %v", err)
	}
	if err := (Checkpoint{Origin: "a b", Size: 1}).Validate(); !errors.Is(err, ErrBadCheckpoint) {
		t.Fatalf("bad origin: %v", err)
	}
	if err := (Checkpoint{Origin: testOrigin, Size: 1}).Validate(); err != nil {
		t.Fatal(err)
	}
	if ValidOrigin("") || !ValidOrigin(testOrigin) {
		t.Fatal("ValidOrigin")
	}
}

// FuzzParse proves Parse is not malleable: whatever it accepts re-marshals
// to the same bytes.
func FuzzParse(f *testing.F) {
	f.Add([]byte(testOrigin + "\n1\n" + tlog.RecordHash(nil).String() + "\n"))
	f.Add([]byte("a\n0\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrBadCheckpoint) {
				t.Fatalf("error %v does not match ErrBadCheckpoint", err)
			}
			return
		}
		if !bytes.Equal(c.Marshal(), b) {
			t.Fatalf("Parse accepted %q but Marshal gives %q", b, c.Marshal())
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted checkpoint does not validate: %v", err)
		}
	})
}
