package policy

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// The flat cache answers every Get as OPA's own virtual cache (the plain
// path, kept as the reference) does after the same random sequence of
// Push, Pop and Put, over keys whose terms are permutations of one another
// (equal sums of term hashes), of several lengths and kinds, with values
// and undefined marks; a key slice reused by the caller after Put must not
// change what is stored. Each run's flat cache is released at its end,
// wherever its frames are, so that later runs get reused caches, which must
// answer as a new OPA cache does.
func TestFlatCacheAgreesWithOPA(t *testing.T) {
	terms := []*ast.Term{
		ast.StringTerm("a"), ast.StringTerm("b"), ast.NumberTerm("1"), ast.BooleanTerm(true), ast.NullTerm(),
		ast.ArrayTerm(ast.StringTerm("hiv")), ast.ArrayTerm(), ast.SetTerm(ast.StringTerm("x"), ast.StringTerm("y")),
		ast.ObjectTerm(ast.Item(ast.StringTerm("grant"), ast.StringTerm("g"))),
	}
	fn := ast.RefTerm(ast.VarTerm("data"), ast.StringTerm("f"))
	rnd := rand.New(rand.NewPCG(1, 2))
	key := func() ast.Ref {
		n := 1 + rnd.IntN(4)
		ref := ast.Ref{fn}
		if rnd.IntN(3) == 0 {
			ref = ast.MustParseRef("data.custos.authz.rule")
		}
		for range n {
			ref = append(ref, terms[rnd.IntN(len(terms))])
		}
		return ref
	}
	var keys []ast.Ref
	for range 60 {
		keys = append(keys, key())
	}
	// Permutations of one key: the sums of their term hashes are equal.
	keys = append(keys, ast.Ref{fn, terms[0], terms[1]}, ast.Ref{fn, terms[1], terms[0]})
	for run := range 20 {
		flat, opa := newFlatCache(), topdown.NewVirtualCache()
		if n := len(flat.Keys()); n != 0 || len(flat.frames) != 1 {
			t.Fatalf("run %d: a reused cache has %d keys, %d frames", run, n, len(flat.frames))
		}
		depth := 0
		for step := range 400 {
			switch op := rnd.IntN(10); {
			case op == 0 && depth < 3:
				flat.Push()
				opa.Push()
				depth++
			case op == 1 && depth > 0:
				flat.Pop()
				opa.Pop()
				depth--
			case op < 6:
				k := slices.Clone(keys[rnd.IntN(len(keys))])
				var v *ast.Term
				if rnd.IntN(4) > 0 {
					v = ast.IntNumberTerm(step)
				}
				flat.Put(k, v)
				opa.Put(k, v)
				k[len(k)-1] = ast.StringTerm("reused") // OPA reuses key slices
			}
			for _, k := range keys {
				fv, fu := flat.Get(k)
				ov, ou := opa.Get(k)
				if fu != ou || (fv == nil) != (ov == nil) || (fv != nil && !fv.Equal(ov)) {
					t.Fatalf("run %d step %d, key %v: flat (%v, %v), OPA (%v, %v)", run, step, k, fv, fu, ov, ou)
				}
			}
			if len(flat.Keys()) != len(opa.Keys()) {
				t.Fatalf("run %d step %d: %d keys, OPA %d", run, step, len(flat.Keys()), len(opa.Keys()))
			}
		}
		flat.release()
	}
}

// A subject store finds each of several keys kept under one hash, and
// tells a key it does not hold from one known to be undefined.
func TestSubjectStoreCollisions(t *testing.T) {
	s := &subjectStore{m: map[uint64]storedValue{}, limit: 10}
	key := func(arg string) ast.Ref { return append(ast.MustParseRef("data.x.f"), ast.StringTerm(arg)) }
	a, b, c, d := key("1"), key("2"), key("3"), key("4")
	const h = 42 // one hash for all of them
	s.keep(h, a, nil)
	s.keep(h, b, ast.StringTerm("B"))
	s.keep(h, c, ast.StringTerm("C"))
	for _, tc := range []struct {
		ref       ast.Ref
		want      *ast.Term
		undefined bool
	}{{a, nil, true}, {b, ast.StringTerm("B"), false}, {c, ast.StringTerm("C"), false}, {d, nil, false}} {
		v, undefined := s.lookupHash(h, tc.ref)
		if undefined != tc.undefined || (v == nil) != (tc.want == nil) || (v != nil && !v.Equal(tc.want)) {
			t.Errorf("%v: (%v, %v), want (%v, %v)", tc.ref, v, undefined, tc.want, tc.undefined)
		}
	}
	if v, undefined := s.lookupHash(h+1, b); v != nil || undefined {
		t.Errorf("b under another hash: (%v, %v), want unknown", v, undefined)
	}
}
