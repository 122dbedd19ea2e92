package policy

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Principal is the authenticated caller, as the policy sees it.
type Principal struct {
	Sub      string   `json:"sub"`       // unique user id (45 CFR 164.312(a)(2)(i))
	Roles    []string `json:"roles"`     // e.g. "clinician", "sensitive:hiv"
	ClientID string   `json:"client_id"` // the AI client / agent acting for Sub
	Tenant   string   `json:"tenant"`    // the organization Sub belongs to
	Patients []string `json:"patients"`  // patient UUIDs Sub has a care relationship with
}

// Resource describes the resource a list entry or read concerns. It carries
// labels, never the payload.
type Resource struct {
	URI         string   `json:"uri"`
	Type        string   `json:"type"`        // lowercase: patient, observation, ..., note, report, image
	Patient     string   `json:"patient"`     // UUID of the patient the resource concerns
	Tenant      string   `json:"tenant"`      // owning organization
	Sensitivity []string `json:"sensitivity"` // "hiv", "sud", "vip"
	Consent     []string `json:"consent"`     // "opt-out"
}

// Action is what the caller asks to do.
type Action string

// Actions. List and read are decided by the same policy rules, per resource.
const (
	ActionList      Action = "list"      // the resource would appear in resources/list
	ActionRead      Action = "read"      // resources/read of the resource
	ActionTemplates Action = "templates" // resources/templates/list; carries no PHI
)

// Input is the policy input document (input in Rego).
type Input struct {
	Principal Principal `json:"principal"`
	// Subject, if set, is Principal already converted by NewSubject; it
	// replaces Principal (which must then be zero or the same principal's
	// Sub). A list request decides dozens of resources for one caller, and
	// converting a principal with thousands of care relationships for each
	// of them cost more than the evaluation (BenchmarkListPage100k).
	Subject      *Subject  `json:"-"`
	PurposeOfUse string    `json:"purpose_of_use"` // HL7 v3 ActReason, e.g. "TREAT"; "" means missing
	Action       Action    `json:"action"`
	Resource     *Resource `json:"resource,omitempty"` // required for list and read
	// BreakGlass, if set, is the active break-the-glass grant that covers
	// the principal and the resource's patient (the server looked it up in
	// the grants store; the policy decides what it permits).
	BreakGlass *BreakGlass `json:"break_glass,omitempty"`
}

// BreakGlass names an active emergency-access grant.
type BreakGlass struct {
	Grant   string `json:"grant"`   // grant id
	Patient string `json:"patient"` // the patient the grant covers
}

// validate checks what the engine, not the policy, requires of an Input.
// Subject is a Principal converted once to its policy input form. It is
// immutable; reuse it for the decisions of one request.
type Subject struct {
	sub    string
	term   *ast.Term
	digest [32]byte                     // principalDigest, the decision cache's view of the subject
	fields [numPrincipalFields][32]byte // principalFieldDigests, the subject cache's
	enc    []byte                       // appendPrincipal: what digest is the SHA-256 of, the memo's key
}

// NewSubject converts p for reuse across decisions. Subjects are
// memoized by the encoding of every principal field (appendPrincipal; a
// server converts the same principal on each of its requests, and the
// conversion of a large care team is the costly part): an equal principal
// gets the same *Subject. The memo is looked up by a seeded non-crypto hash
// of the encoding and the whole encoding compared, so that a request of a
// known principal hashes nothing with SHA-256 (two SHA-256 of a
// 100-patient care team per read before: docs/benchmarks.md, "Issue 17,
// twenty-fourth step").
func NewSubject(p Principal) *Subject {
	bp := digestBufs.Get().(*[]byte)
	enc := appendPrincipal((*bp)[:0], &p)
	h := maphash.Bytes(subjectSeed, enc)
	s := subjects.get(h, enc)
	if s == nil {
		s = &Subject{sub: p.Sub, term: principalTerm(&p), digest: sum256(enc), fields: principalFieldDigests(&p), enc: bytes.Clone(enc)}
		// Concurrent evaluations share the term: sort its keys now, as OPA
		// would on first use, so that no evaluation writes to it.
		freeze(s.term.Value)
		subjects.put(h, s)
	}
	*bp = enc
	digestBufs.Put(bp)
	return s
}

// subjectMemoSize bounds the Subjects NewSubject keeps.
const subjectMemoSize = 4096

var (
	subjects    = &subjectMemo{m: make(map[uint64]*Subject)}
	subjectSeed = maphash.MakeSeed()
)

// subjectMemo maps maphash(subjectSeed, s.enc) to s. Two encodings with
// the same hash (a collision) take turns: the newer replaces the older.
type subjectMemo struct {
	mu sync.RWMutex
	m  map[uint64]*Subject
}

// get is the Subject whose encoding is enc (hash h), or nil.
func (m *subjectMemo) get(h uint64, enc []byte) *Subject {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if s := m.m[h]; s != nil && bytes.Equal(s.enc, enc) {
		return s
	}
	return nil
}

func (m *subjectMemo) put(h uint64, s *Subject) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.m) >= subjectMemoSize {
		clear(m.m) // a bound, not a policy: start afresh
	}
	m.m[h] = s
}

func (in *Input) validate() error {
	if s := in.Subject; s != nil {
		if s.term == nil {
			return fmt.Errorf("%w: Subject was not made by NewSubject", ErrBadInput)
		}
		// A Principal given beside the Subject must be the same principal
		// in every field (the Subject is what the policy sees).
		if !in.Principal.isZero() && principalDigest(&in.Principal) != s.digest {
			return fmt.Errorf("%w: Principal and Subject are different principals", ErrBadInput)
		}
	}
	switch in.Action {
	case ActionList, ActionRead:
		if in.Resource == nil {
			return fmt.Errorf("%w: action %q needs a resource", ErrBadInput, in.Action)
		}
	case ActionTemplates:
	default:
		// The value is left out: errors must never carry input values.
		return fmt.Errorf("%w: unknown action (%d bytes)", ErrBadInput, len(in.Action))
	}
	return nil
}

func (p *Principal) isZero() bool {
	return p.Sub == "" && len(p.Roles) == 0 && p.ClientID == "" && p.Tenant == "" && len(p.Patients) == 0
}

// Object keys, built once. OPA treats terms as immutable, so they are shared.
var (
	keySub         = ast.StringTerm("sub")
	keyRoles       = ast.StringTerm("roles")
	keyClientID    = ast.StringTerm("client_id")
	keyTenant      = ast.StringTerm("tenant")
	keyPatients    = ast.StringTerm("patients")
	keyPrincipal   = ast.StringTerm("principal")
	keyPurpose     = ast.StringTerm("purpose_of_use")
	keyAction      = ast.StringTerm("action")
	keyResource    = ast.StringTerm("resource")
	keyURI         = ast.StringTerm("uri")
	keyType        = ast.StringTerm("type")
	keyPatient     = ast.StringTerm("patient")
	keySensitivity = ast.StringTerm("sensitivity")
	keyConsent     = ast.StringTerm("consent")
	keyBreakGlass  = ast.StringTerm("break_glass")
	keyGrant       = ast.StringTerm("grant")
)

// value converts in to the AST value OPA evaluates, without the JSON round
// trip ast.InterfaceToValue does for structs. It produces exactly the JSON
// encoding of Input, except that nil slices become [] (not null), so the
// policy never has to handle null lists.
func principalTerm(p *Principal) *ast.Term {
	return ast.NewTerm(ast.NewObject(
		ast.Item(keySub, ast.StringTerm(p.Sub)),
		ast.Item(keyRoles, stringArray(p.Roles)),
		ast.Item(keyClientID, ast.StringTerm(p.ClientID)),
		ast.Item(keyTenant, ast.StringTerm(p.Tenant)),
		ast.Item(keyPatients, stringArray(p.Patients)),
	))
}

func (in *Input) value() ast.Value {
	principal := in.Subject.termOr(&in.Principal)
	items := make([][2]*ast.Term, 3, 5)
	items[0] = ast.Item(keyPrincipal, principal)
	items[1] = ast.Item(keyPurpose, sharedStringTerm(in.PurposeOfUse))
	items[2] = ast.Item(keyAction, actionTerm(in.Action))
	if r := in.Resource; r != nil {
		items = append(items, ast.Item(keyResource, resourceTerm(r)))
	}
	if bg := in.BreakGlass; bg != nil {
		items = append(items, ast.Item(keyBreakGlass, breakGlassTerm(bg)))
	}
	return ast.NewObject(items...)
}

func resourceTerm(r *Resource) *ast.Term { return resourceFields(r, true) }

// resourceFields is resourceTerm without "uri" unless withURI (a batch
// item of a policy that reads no URI: batchValue).
func resourceFields(r *Resource, withURI bool) *ast.Term {
	fields := make([][2]*ast.Term, 0, 6)
	if withURI {
		fields = append(fields, ast.Item(keyURI, ast.StringTerm(r.URI)))
	}
	return ast.ObjectTerm(append(fields,
		ast.Item(keyType, sharedStringTerm(r.Type)),
		ast.Item(keyPatient, ast.StringTerm(r.Patient)),
		ast.Item(keyTenant, sharedStringTerm(r.Tenant)),
		ast.Item(keySensitivity, stringArray(r.Sensitivity)),
		ast.Item(keyConsent, stringArray(r.Consent)),
	)...)
}

func breakGlassTerm(bg *BreakGlass) *ast.Term {
	return ast.ObjectTerm(
		ast.Item(keyGrant, ast.StringTerm(bg.Grant)),
		ast.Item(keyPatient, ast.StringTerm(bg.Patient)),
	)
}

// stringArray is the array term of ss; its element terms are allocated
// together (a care team of thousands of patients is one allocation, not
// thousands), each equal to ast.StringTerm of its string.
func stringArray(ss []string) *ast.Term {
	if len(ss) == 0 {
		return ast.InternedEmptyArray
	}
	elems := make([]ast.Term, len(ss))
	terms := make([]*ast.Term, len(ss))
	for i, s := range ss {
		elems[i].Value = ast.String(s)
		terms[i] = &elems[i]
	}
	return ast.ArrayTerm(terms...)
}

// The terms of the actions, and of the strings many inputs share (purposes
// of use, resource types, tenants), are made once and shared, like the
// object keys above and ast.InternedEmptyArray: OPA never changes a term of
// the input, and a string term has nothing it computes later.
var (
	termList      = ast.StringTerm(string(ActionList))
	termRead      = ast.StringTerm(string(ActionRead))
	termTemplates = ast.StringTerm(string(ActionTemplates))
)

func actionTerm(a Action) *ast.Term {
	switch a {
	case ActionList:
		return termList
	case ActionRead:
		return termRead
	case ActionTemplates:
		return termTemplates
	}
	return ast.StringTerm(string(a))
}

// maxSharedTerms bounds the strings sharedStringTerm keeps (a bound, not a
// policy: past it, terms are made per input).
const maxSharedTerms = 4096

var (
	sharedTerms  sync.Map // string -> *ast.Term
	sharedTermsN atomic.Int32
)

// sharedStringTerm returns ast.StringTerm(s), shared with every other
// input that holds s. It is for values that repeat across requests
// (purposes, resource types, tenants), never for identifiers of patients
// or resources, which would only fill the table.
func sharedStringTerm(s string) *ast.Term {
	if t, ok := sharedTerms.Load(s); ok {
		return t.(*ast.Term)
	}
	t := ast.StringTerm(s)
	if sharedTermsN.Load() < maxSharedTerms {
		if prev, loaded := sharedTerms.LoadOrStore(s, t); loaded {
			return prev.(*ast.Term)
		}
		sharedTermsN.Add(1)
	}
	return t
}

func (s *Subject) termOr(p *Principal) *ast.Term {
	if s != nil {
		return s.term
	}
	return principalTerm(p)
}
