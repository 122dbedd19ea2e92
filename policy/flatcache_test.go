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
// change what is stored.
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
	}
}

// A subject store finds each of several keys that share a hash bucket.
func TestSubjectStoreCollisions(t *testing.T) {
	s := &subjectStore{m: map[uint64][]storedValue{}, limit: 10}
	a := ast.MustParseRef("data.x.f")
	a = append(a, ast.StringTerm("1"))
	b := ast.MustParseRef("data.x.f")
	b = append(b, ast.StringTerm("2"))
	// Force both into a's bucket.
	s.m[refHash(a)] = []storedValue{{ref: b, value: ast.StringTerm("B")}, {ref: a, value: nil}}
	if v, undefined := s.lookup(a); v != nil || !undefined {
		t.Fatalf("a: (%v, %v), want undefined", v, undefined)
	}
	if v, undefined := s.lookup(b); v != nil || undefined {
		t.Fatalf("b looked up in its own bucket: (%v, %v), want unknown", v, undefined)
	}
	s.m[refHash(b)] = s.m[refHash(a)]
	if v, _ := s.lookup(b); v == nil || !v.Equal(ast.StringTerm("B")) {
		t.Fatalf("b: %v", v)
	}
}
