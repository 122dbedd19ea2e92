package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// appendN appends checkpoints for sizes 1..n of tr to a.
func appendN(t *testing.T, a *Anchor, s *Signer, tr *memTree, sizes ...int64) []Entry {
	t.Helper()
	var out []Entry
	for i, size := range sizes {
		e := signedEntry(t, s, tr, size)
		e.Time = t0.Add(time.Duration(i) * time.Second)
		if err := a.Append(context.Background(), e.Note, Checkpoint{Origin: testOrigin, Size: e.Size, Root: e.Root}, e.Time); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func TestAnchorAppendLatestAll(t *testing.T) {
	s, _, _ := testSigner(t)
	tr := newTree("rec", 10)
	a := &Anchor{Dir: t.TempDir()}

	if es, err := a.All(); err != nil || len(es) != 0 {
		t.Fatalf("All on missing file = %v, %v", es, err)
	}
	if _, ok, err := a.Latest(); ok || err != nil {
		t.Fatalf("Latest on missing file = %v, %v", ok, err)
	}

	want := appendN(t, a, s, tr, 1, 4, 10)
	fi, err := os.Stat(a.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
	es, err := a.All()
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != len(want) {
		t.Fatalf("All: %d entries, want %d", len(es), len(want))
	}
	for i, e := range es {
		w := want[i]
		if e.Size != w.Size || e.Root != w.Root || !bytes.Equal(e.Note, w.Note) || !e.Time.Equal(w.Time) || e.Line != i+1 || e.Source != a.Path() {
			t.Fatalf("entry %d = %+v, want %+v", i, e, w)
		}
	}
	last, ok, err := a.Latest()
	if err != nil || !ok || last.Size != 10 || last.Root != want[2].Root || last.Offset != es[2].Offset {
		t.Fatalf("Latest = %+v, %v, %v", last, ok, err)
	}
	// The file is exactly the concatenation of FormatLine outputs.
	var buf bytes.Buffer
	for _, w := range want {
		b, err := FormatLine(w)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
	}
	got, _ := os.ReadFile(a.Path())
	if !bytes.Equal(got, buf.Bytes()) {
		t.Fatalf("file:\n%s\nwant:\n%s", got, buf.Bytes())
	}
}

func TestAnchorLatestLargeFile(t *testing.T) {
	// Enough lines that Latest's first tail window does not cover a torn
	// tail plus the line before it, to exercise window growth.
	s, _, _ := testSigner(t)
	tr := newTree("rec", 1)
	a := &Anchor{Dir: t.TempDir()}
	e := signedEntry(t, s, tr, 1)
	line, err := FormatLine(Entry{Size: 1, Root: e.Root, Note: e.Note, Time: t0})
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat(line, 200)
	// A very long torn tail (10 KiB of junk, no newline).
	torn := append(append([]byte(nil), data...), bytes.Repeat([]byte("x"), 10<<10)...)
	if err := os.WriteFile(a.Path(), torn, 0o600); err != nil {
		t.Fatal(err)
	}
	got, ok, err := a.Latest()
	var te *TornError
	if !errors.As(err, &te) || te.Offset != int64(len(data)) || !ok || got.Size != 1 || got.Offset != int64(len(data)-len(line)) {
		t.Fatalf("Latest = %+v, %v, %v", got, ok, err)
	}
}

func TestAnchorTorn(t *testing.T) {
	s, _, _ := testSigner(t)
	tr := newTree("rec", 5)
	for _, tc := range []struct {
		name string
		tail string
	}{
		{"no newline", `{"size":5,"root":"AAAA`},
		{"invalid JSON with newline", "{\"size\":5,\"ro\n"},
		{"zeros", "\x00\x00\x00\x00"},
		{"empty last line", "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &Anchor{Dir: t.TempDir()}
			appendN(t, a, s, tr, 1, 2)
			good, _ := os.ReadFile(a.Path())
			f, err := os.OpenFile(a.Path(), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(tc.tail)
			f.Close()

			es, err := a.All()
			var te *TornError
			if !errors.As(err, &te) || !errors.Is(err, ErrTorn) {
				t.Fatalf("All error = %v, want *TornError", err)
			}
			if te.Offset != int64(len(good)) || te.Line != 3 || len(es) != 2 {
				t.Fatalf("TornError %+v, %d entries", te, len(es))
			}
			if !strings.Contains(err.Error(), "truncate") {
				t.Errorf("error does not tell the operator what to do: %v", err)
			}
			if !strings.Contains(err.Error(), "line 3,") {
				t.Errorf("All's error does not name line 3: %v", err)
			}
			last, ok, err := a.Latest()
			if !errors.Is(err, ErrTorn) || !ok || last.Size != 2 {
				t.Fatalf("Latest = %+v, %v, %v", last, ok, err)
			}
			// Latest reads only the file's tail, so it does not know the
			// line number: the message must not name one ("line 0").
			if strings.Contains(err.Error(), "line 0") || !strings.Contains(err.Error(), fmt.Sprintf("byte offset %d", len(good))) {
				t.Errorf("Latest's error names no true position: %v", err)
			}
			if strings.HasSuffix(tc.tail, "\n") {
				return // Append's check is about a missing newline
			}
			e := signedEntry(t, s, tr, 5)
			err = a.Append(context.Background(), e.Note, Checkpoint{Origin: testOrigin, Size: 5, Root: e.Root}, t0)
			if !errors.As(err, &te) || te.Offset != int64(len(good)) {
				t.Fatalf("Append after torn tail = %v", err)
			}
			if strings.Contains(err.Error(), "line 0") {
				t.Errorf("Append's error names line 0: %v", err)
			}
			after, _ := os.ReadFile(a.Path())
			if !bytes.Equal(after, append(good, tc.tail...)) {
				t.Fatal("Append wrote after a torn tail")
			}
			// The operator's procedure (truncate at Offset) recovers.
			if err := os.Truncate(a.Path(), te.Offset); err != nil {
				t.Fatal(err)
			}
			if es, err := a.All(); err != nil || len(es) != 2 {
				t.Fatalf("after truncate: %d, %v", len(es), err)
			}
		})
	}
}

func TestAnchorTornOnlyLine(t *testing.T) {
	a := &Anchor{Dir: t.TempDir()}
	if err := os.WriteFile(a.Path(), []byte(`{"size":1`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.Latest(); ok || !errors.Is(err, ErrTorn) {
		t.Fatalf("Latest = %v, %v", ok, err)
	}
	if es, err := a.All(); len(es) != 0 || !errors.Is(err, ErrTorn) {
		t.Fatalf("All = %v, %v", es, err)
	}
}

func TestAnchorCorruptMiddle(t *testing.T) {
	s, _, _ := testSigner(t)
	tr := newTree("rec", 5)
	a := &Anchor{Dir: t.TempDir()}
	appendN(t, a, s, tr, 1, 2, 3, 4)
	data, _ := os.ReadFile(a.Path())
	lines := bytes.SplitAfter(data, []byte("\n"))
	// Line 2: change the size field only (the note still says 2).
	lines[1] = bytes.Replace(lines[1], []byte(`"size":2`), []byte(`"size":7`), 1)
	if err := os.WriteFile(a.Path(), bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	es, err := a.All()
	var ce *CorruptLineError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorruptAnchor) || ce.Line != 2 || len(es) != 1 {
		t.Fatalf("All = %d entries, %v", len(es), err)
	}
	if !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("error does not name the line: %v", err)
	}
	// An empty line in the middle is corruption too.
	lines = bytes.SplitAfter(data, []byte("\n"))
	withBlank := append(append(append([]byte(nil), lines[0]...), '\n'), bytes.Join(lines[1:], nil)...)
	os.WriteFile(a.Path(), withBlank, 0o600)
	if _, err := a.All(); !errors.As(err, &ce) || ce.Line != 2 {
		t.Fatalf("blank line: %v", err)
	}
}

func TestAnchorMissingDir(t *testing.T) {
	a := &Anchor{Dir: filepath.Join(t.TempDir(), "not-mounted")}
	if _, err := a.All(); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("All: %v", err)
	}
	if _, _, err := a.Latest(); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Latest: %v", err)
	}
	s, _, _ := testSigner(t)
	e := signedEntry(t, s, newTree("rec", 1), 1)
	if err := a.Append(context.Background(), e.Note, Checkpoint{Origin: testOrigin, Size: 1, Root: e.Root}, t0); err == nil {
		t.Fatal("Append into a missing directory succeeded")
	}
	if _, err := os.Stat(a.Dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("Append created the anchor directory")
	}
}

func TestAnchorAppendRejects(t *testing.T) {
	s, _, _ := testSigner(t)
	tr := newTree("rec", 2)
	a := &Anchor{Dir: t.TempDir()}
	e := signedEntry(t, s, tr, 2)
	ctx := context.Background()
	if err := a.Append(ctx, e.Note, Checkpoint{Origin: testOrigin, Size: 1, Root: e.Root}, t0); !errors.Is(err, ErrBadCheckpoint) {
		t.Errorf("mismatched checkpoint: %v", err)
	}
	if err := a.Append(ctx, []byte("garbage"), Checkpoint{Origin: testOrigin, Size: 2, Root: e.Root}, t0); !errors.Is(err, ErrBadCheckpoint) {
		t.Errorf("garbage note: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := a.Append(cctx, e.Note, Checkpoint{Origin: testOrigin, Size: 2, Root: e.Root}, t0); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if _, err := os.Stat(a.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a rejected Append created the file")
	}
}

func TestParseLineRejects(t *testing.T) {
	s, _, _ := testSigner(t)
	e := signedEntry(t, s, newTree("rec", 3), 3)
	e.Time = t0
	good, err := FormatLine(e)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ParseLine(good); err != nil || got.Size != 3 || got.Root != e.Root || !got.Time.Equal(t0) {
		t.Fatalf("ParseLine(good) = %+v, %v", got, err)
	}
	other := tlog.RecordHash([]byte("other")).String()
	g := string(good)
	for name, line := range map[string]string{
		"empty":         "",
		"not json":      "hello",
		"extra field":   strings.Replace(g, `{"size"`, `{"x":1,"size"`, 1),
		"missing time":  strings.Replace(g, `,"time":"2026-11-21T10:00:00Z"`, "", 1),
		"bad time":      strings.Replace(g, `2026-11-21T10:00:00Z`, `yesterday`, 1),
		"root mismatch": strings.Replace(g, `"root":"`+e.Root.String(), `"root":"`+other, 1),
		"size mismatch": strings.Replace(g, `"size":3`, `"size":4`, 1),
		"negative":      strings.Replace(g, `"size":3`, `"size":-3`, 1),
		"trailing":      strings.TrimSuffix(g, "\n") + "{}",
		"two objects":   strings.TrimSuffix(g, "\n") + g,
		"note no sig":   strings.Replace(g, `\n\n—`, `\n—`, 1),
	} {
		if _, err := ParseLine([]byte(line)); !errors.Is(err, ErrBadCheckpoint) {
			t.Errorf("%s: ParseLine = %v", name, err)
		}
	}
}

// FuzzParseLine proves an accepted anchor line re-formats to the same
// bytes when it is in canonical form, and never panics otherwise.
func FuzzParseLine(f *testing.F) {
	golden, err := os.ReadFile(filepath.Join("testdata", "golden", "anchor-line.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	f.Add([]byte(`{"size":0,"root":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","note":"a\n0\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n— a AAAAAAA=\n","time":"2026-01-01T00:00:00Z"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseLine(b)
		if err != nil {
			if !errors.Is(err, ErrBadCheckpoint) {
				t.Fatalf("error %v does not match ErrBadCheckpoint", err)
			}
			return
		}
		out, err := FormatLine(e)
		if err != nil {
			t.Fatal(err)
		}
		e2, err := ParseLine(out)
		if err != nil {
			t.Fatalf("re-formatted line does not parse: %v", err)
		}
		if e2.Size != e.Size || e2.Root != e.Root || !bytes.Equal(e2.Note, e.Note) || !e2.Time.Equal(e.Time) {
			t.Fatalf("round trip changed the entry")
		}
	})
}

// A line whose number is unknown (found by Latest or Append, which read
// the file's tail) is named by its byte offset only, not as "line 0".
func TestAnchorErrorUnknownLine(t *testing.T) {
	for _, err := range []error{
		&TornError{Path: "a", Offset: 658, Reason: "no trailing newline"},
		&CorruptLineError{Path: "a", Offset: 658, Reason: "bad"},
	} {
		if msg := err.Error(); strings.Contains(msg, "line 0") || !strings.Contains(msg, "byte offset 658") {
			t.Errorf("%T: %s", err, msg)
		}
	}
	for _, err := range []error{
		&TornError{Path: "a", Line: 3, Offset: 658, Reason: "no trailing newline"},
		&CorruptLineError{Path: "a", Line: 3, Offset: 658, Reason: "bad"},
	} {
		if msg := err.Error(); !strings.Contains(msg, "line 3") || !strings.Contains(msg, "byte offset 658") {
			t.Errorf("%T: %s", err, msg)
		}
	}
}
