package checkpoint

import (
	"context"
	"errors"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

func TestFindFork(t *testing.T) {
	s, _, _ := testSigner(t)
	a, b := newTree("a", 8), newTree("a", 4)
	b.grow("b", 4) // same first 4 records, different 5..8
	a4, a6, a8 := signedEntry(t, s, a, 4), signedEntry(t, s, a, 6), signedEntry(t, s, a, 8)
	b4, b6 := signedEntry(t, s, b, 4), signedEntry(t, s, b, 6)
	a6.Source, a6.Line = "/anchor/checkpoints.jsonl", 2
	b6.Source, b6.Line = "/data/checkpoints.jsonl", 5

	tests := []struct {
		name    string
		entries []Entry
		fork    int64 // 0: none
	}{
		{"empty", nil, 0},
		{"increasing", []Entry{a4, a6, a8}, 0},
		{"duplicate same root", []Entry{a4, a4, a6, a6}, 0},
		{"shared prefix", []Entry{a4, b4}, 0},
		{"fork", []Entry{a4, a6, b6, a8}, 6},
		{"fork any order", []Entry{b6, a8, a4, a6}, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := FindFork(tt.entries)
			if tt.fork == 0 {
				if f != nil {
					t.Fatalf("unexpected fork %v", f)
				}
				return
			}
			if f == nil || f.Size != tt.fork || f.A.Root == f.B.Root || f.A.Note == nil || f.B.Note == nil {
				t.Fatalf("FindFork = %+v", f)
			}
			if !errors.Is(f, ErrFork) {
				t.Fatal("ForkError does not match ErrFork")
			}
			msg := f.Error()
			for _, want := range []string{"size 6", a6.Root.String(), b6.Root.String(), "line 2", "line 5"} {
				if !strings.Contains(msg, want) {
					t.Errorf("%q lacks %q", msg, want)
				}
			}
		})
	}
}

func TestCheckMonotonic(t *testing.T) {
	mk := func(sizes ...int64) []Entry {
		var es []Entry
		for i, s := range sizes {
			es = append(es, Entry{Size: s, Line: i + 1, Source: "f"})
		}
		return es
	}
	if err := CheckMonotonic(mk(1, 2, 2, 9)); err != nil {
		t.Fatal(err)
	}
	err := CheckMonotonic(mk(1, 5, 3, 9))
	var re *RegressionError
	if !errors.As(err, &re) || !errors.Is(err, ErrRolledBack) || re.Prev.Size != 5 || re.Next.Size != 3 || re.Next.Line != 3 {
		t.Fatalf("CheckMonotonic = %v", err)
	}
}

func TestLoad(t *testing.T) {
	s, _, _ := testSigner(t)
	tr := newTree("rec", 10)
	local, ext := &Anchor{Dir: t.TempDir()}, &Anchor{Dir: t.TempDir()}
	appendN(t, local, s, tr, 2, 5)
	appendN(t, ext, s, tr, 1, 3, 10)
	es, err := Load(local, ext)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	for _, e := range es {
		sizes = append(sizes, e.Size)
	}
	if len(sizes) != 5 || sizes[0] != 1 || sizes[4] != 10 {
		t.Fatalf("Load sizes %v", sizes)
	}
	// A regression inside one anchor is refused.
	appendN(t, local, s, tr, 4)
	if _, err := Load(local, ext); !errors.Is(err, ErrRolledBack) {
		t.Fatalf("Load with regression: %v", err)
	}
}

func TestCheckAgainst(t *testing.T) {
	ctx := context.Background()
	s, _, v := testSigner(t)
	other, _, _ := testSignerNamed(t, testOrigin, 42) // same origin, untrusted key

	base := newTree("rec", 10)
	ahead := newTree("rec", 25)
	forked := newTree("rec", 6)
	forked.grow("evil", 4)       // size 10, differs from base after 6
	regrown := newTree("rec", 6) // rolled back to 6 then regrown to 20
	regrown.grow("evil", 14)

	e5, e10 := signedEntry(t, s, base, 5), signedEntry(t, s, base, 10)
	e10.Source, e10.Line = "/anchor/checkpoints.jsonl", 2
	bad := signedEntry(t, other, base, 10)
	forkedNote := signedEntry(t, s, forked, 10)

	tests := []struct {
		name    string
		tree    Tree
		entries []Entry
		want    error
		check   func(t *testing.T, err error)
	}{
		{name: "nothing anchored", tree: base},
		{name: "equal", tree: base, entries: []Entry{e5, e10}},
		{name: "local ahead", tree: ahead, entries: []Entry{e5, e10}},
		{name: "rolled back", tree: newTree("rec", 7), entries: []Entry{e5, e10}, want: ErrRolledBack,
			check: func(t *testing.T, err error) {
				var rb *RolledBackError
				if !errors.As(err, &rb) || rb.LocalSize != 7 || rb.Anchored.Size != 10 || string(rb.Anchored.Note) != string(e10.Note) {
					t.Fatalf("%+v", err)
				}
				if !strings.Contains(err.Error(), "line 2") {
					t.Errorf("error does not locate the anchored checkpoint: %v", err)
				}
			}},
		{name: "truncated to empty", tree: &memTree{}, entries: []Entry{e10}, want: ErrRolledBack},
		{name: "forked same size", tree: forked, entries: []Entry{e5, e10}, want: ErrFork,
			check: func(t *testing.T, err error) {
				var f *ForkError
				if !errors.As(err, &f) || f.Size != 10 || f.A.Root != e10.Root || !f.A.Verified || f.B.Note != nil || f.B.Source != "local audit tree" {
					t.Fatalf("%+v", err)
				}
				if want, _ := forked.TreeHash(10); f.B.Root != want {
					t.Fatalf("local root %s, want %s", f.B.Root, want)
				}
			}},
		{name: "regrown past anchor", tree: regrown, entries: []Entry{e5, e10}, want: ErrFork},
		{name: "two anchored roots", tree: base, entries: []Entry{e5, e10, forkedNote}, want: ErrFork,
			check: func(t *testing.T, err error) {
				var f *ForkError
				if !errors.As(err, &f) || !f.A.Verified || !f.B.Verified || f.A.Note == nil || f.B.Note == nil {
					t.Fatalf("%+v", err)
				}
			}},
		{name: "bad signature", tree: base, entries: []Entry{e5, bad}, want: ErrBadSignature},
		{name: "entry differs from note", tree: base, entries: []Entry{{Size: 10, Root: e5.Root, Note: e10.Note}}, want: ErrBadCheckpoint},
		{name: "local tree inconsistent", tree: &lyingTree{memTree: ahead}, entries: []Entry{e10}, want: ErrInconsistent},
		{name: "head error", tree: &memTree{headErr: errors.New("disk")}, entries: []Entry{e10}, want: errAny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckAgainst(ctx, tt.tree, tt.entries, v)
			switch {
			case tt.want == nil && err != nil:
				t.Fatalf("CheckAgainst = %v, want nil", err)
			case tt.want == errAny && err == nil:
				t.Fatal("CheckAgainst = nil, want an error")
			case tt.want != nil && tt.want != errAny && !errors.Is(err, tt.want):
				t.Fatalf("CheckAgainst = %v, want %v", err, tt.want)
			}
			if tt.check != nil {
				tt.check(t, err)
			}
		})
	}
}

var errAny = errors.New("any error")

// lyingTree returns a consistency proof that does not verify.
type lyingTree struct{ *memTree }

func (l *lyingTree) ProveTree(oldSize, newSize int64) (tlog.TreeProof, error) {
	p, err := l.memTree.ProveTree(oldSize, newSize)
	if err == nil && len(p) > 0 {
		p[0][0] ^= 1
	}
	return p, err
}
