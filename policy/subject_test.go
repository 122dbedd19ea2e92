package policy

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// A Subject decides exactly as the Principal it was made from.
func TestSubjectDecidesLikeItsPrincipal(t *testing.T) {
	e := mustDefault(t)
	many := principal("dr.many", "clinician")
	for i := range 5000 {
		many.Patients = append(many.Patients, patientB[:30]+string(rune('a'+i%26))+"00000")
	}
	many.Patients = append(many.Patients, patientA)
	for _, p := range []Principal{clinician, billing, researcher, auditor, many} {
		s := NewSubject(p)
		for _, typ := range []string{"patient", "coverage", "note", "observation"} {
			for _, pat := range []string{patientA, patientB} {
				in := Input{Principal: p, PurposeOfUse: "TREAT", Action: ActionRead, Resource: resource(typ, pat)}
				want, werr := e.Decide(context.Background(), in)
				in.Principal = Principal{}
				in.Subject = s
				got, gerr := e.Decide(context.Background(), in)
				if (werr == nil) != (gerr == nil) || want.Allow != got.Allow || !slices.Equal(want.Reasons, got.Reasons) || !slices.Equal(want.Obligations, got.Obligations) {
					t.Errorf("%s %s/%s: principal %+v/%v, subject %+v/%v", p.Sub, typ, pat, want, werr, got, gerr)
				}
			}
		}
	}
	in := Input{Principal: billing, Subject: NewSubject(clinician), PurposeOfUse: "TREAT", Action: ActionRead, Resource: resource("note", patientA)}
	if d, err := e.Decide(context.Background(), in); !errors.Is(err, ErrBadInput) || d.Allow {
		t.Fatalf("mismatched Principal and Subject: %+v, %v", d, err)
	}
	// The same sub with other roles is another principal too.
	other := clinician
	other.Roles = []string{"auditor"}
	in = Input{Principal: other, Subject: NewSubject(clinician), PurposeOfUse: "TREAT", Action: ActionRead, Resource: resource("note", patientA)}
	if d, err := e.Decide(context.Background(), in); !errors.Is(err, ErrBadInput) || d.Allow {
		t.Fatalf("same sub, other roles: %+v, %v", d, err)
	}
	// Both given and equal is fine.
	in.Principal = clinician
	if d, err := e.Decide(context.Background(), in); err != nil || !d.Allow {
		t.Fatalf("equal Principal and Subject: %+v, %v", d, err)
	}
	// A Subject not made by NewSubject is refused, not a panic.
	in = Input{Subject: &Subject{}, PurposeOfUse: "TREAT", Action: ActionRead, Resource: resource("note", patientA)}
	if d, err := e.Decide(context.Background(), in); !errors.Is(err, ErrBadInput) || d.Allow {
		t.Fatalf("zero Subject: %+v, %v", d, err)
	}
	if ds, err := e.DecideBatch(context.Background(), Input{Subject: &Subject{}, PurposeOfUse: "TREAT", Action: ActionList}, []Item{{Resource: resource("note", patientA)}}); !errors.Is(err, ErrBadInput) || ds[0].Allow {
		t.Fatalf("zero Subject, batch: %+v, %v", ds, err)
	}
}

func BenchmarkDecideManyPatients(b *testing.B) {
	e := mustDefault(b)
	p := principal("dr.many", "clinician")
	for range 5000 {
		p.Patients = append(p.Patients, patientB)
	}
	p.Patients = append(p.Patients, patientA)
	for _, prepared := range []bool{false, true} {
		name := "principal"
		in := Input{Principal: p, PurposeOfUse: "TREAT", Action: ActionRead, Resource: resource("note", patientA)}
		if prepared {
			name = "subject"
			in.Principal, in.Subject = Principal{}, NewSubject(p)
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if d, err := e.Decide(context.Background(), in); err != nil || !d.Allow {
					b.Fatal(d, err)
				}
			}
		})
	}
}

// NewSubject returns the same Subject for an equal principal, and another
// for a principal that differs in any field.
func TestNewSubjectIsMemoizedByEveryField(t *testing.T) {
	base := principal("dr.memo", "clinician")
	s := NewSubject(base)
	if NewSubject(principal("dr.memo", "clinician")) != s {
		t.Fatal("an equal principal got another Subject")
	}
	for name, change := range map[string]func(*Principal){
		"sub":       func(p *Principal) { p.Sub = "dr.other" },
		"roles":     func(p *Principal) { p.Roles = []string{"clinician", "sensitive:hiv"} },
		"client_id": func(p *Principal) { p.ClientID = "other" },
		"tenant":    func(p *Principal) { p.Tenant = "other" },
		"patients":  func(p *Principal) { p.Patients = []string{patientB} },
		"split":     func(p *Principal) { p.Roles = []string{"clinic", "ian"} },
	} {
		p := principal("dr.memo", "clinician")
		change(&p)
		o := NewSubject(p)
		if o == s || o.digest == s.digest {
			t.Errorf("%s changed: same Subject", name)
		}
		if got := o.term.Value.(ast.Object).Get(ast.StringTerm("sub")).Value.(ast.String); string(got) != p.Sub {
			t.Errorf("%s changed: subject term names %q", name, got)
		}
	}
}

// A principal already converted is found without any SHA-256: the memo is
// looked up by its encoding (appendPrincipal), which a read of a large
// care team hashed twice per request before. The Subject found, and a new
// one, carry exactly the plain digests (principalDigest,
// principalFieldDigests: the reference).
func TestSubjectMemoHitHashesNothing(t *testing.T) {
	p := principal("dr.hit", "clinician")
	for i := range 100 {
		p.Patients = append(p.Patients, fmt.Sprintf("%08d-0000-4000-8000-000000000000", i))
	}
	hashed := 0
	sum256 = func(b []byte) [32]byte { hashed++; return sha256.Sum256(b) }
	t.Cleanup(func() { sum256 = sha256.Sum256 })
	s := NewSubject(p)
	hashed = 0
	for range 3 {
		if NewSubject(p) != s {
			t.Fatal("an equal principal got another Subject")
		}
	}
	if hashed != 0 {
		t.Errorf("3 conversions of a known principal computed %d SHA-256, want 0", hashed)
	}
	if s.digest != principalDigest(&p) || s.fields != principalFieldDigests(&p) {
		t.Error("the memoized Subject's digests differ from principalDigest / principalFieldDigests")
	}
}

// Two principals whose encodings share the memo's hash (forced here: one
// slot for every hash) never get each other's Subject: the encoding is
// compared whole.
func TestSubjectMemoComparesTheEncoding(t *testing.T) {
	a, b := principal("dr.a", "clinician"), principal("dr.b", "clinician")
	sa := NewSubject(a)
	encB := appendPrincipal(nil, &b)
	h := maphash.Bytes(subjectSeed, encB)
	subjects.mu.Lock()
	subjects.m[h] = sa // a collision: b's hash holds a's Subject
	subjects.mu.Unlock()
	sb := NewSubject(b)
	if sb == sa || sb.sub != "dr.b" || sb.digest != principalDigest(&b) {
		t.Fatalf("b got a's Subject through a shared hash (sub %q)", sb.sub)
	}
	if NewSubject(b) != sb {
		t.Error("b's Subject was not kept after the collision")
	}
}
