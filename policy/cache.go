package policy

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/custos-mcp/custos/minimize"
)

// DefaultDecisionCache is the number of decisions an Engine memoizes when
// Options.DecisionCache is zero.
const DefaultDecisionCache = 65536

// decisionCache memoizes the decisions of one compiled policy. It is used
// only when the policy is deterministic (no builtin marked nondeterministic
// by OPA, such as time.now_ns, rand.intn or uuid.rfc4122): the decision is
// then a function of the input alone, and the key is a SHA-256 over every
// field of the input the policy can read (cacheKey: all of them, or all
// but the resource's URI). Each hit is a new Decision with a fresh ID and copies
// of the slices; failures are never cached.
type decisionCache struct {
	mu  sync.RWMutex
	max int
	m   map[[32]byte]cachedDecision
}

type cachedDecision struct {
	allow   bool
	reasons []string
	obs     []minimize.Obligation
}

func newDecisionCache(max int) *decisionCache {
	return &decisionCache{max: max, m: make(map[[32]byte]cachedDecision)}
}

func (c *decisionCache) get(k [32]byte) (cachedDecision, bool) {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	return v, ok
}

func (c *decisionCache) put(k [32]byte, d Decision) {
	v := cachedDecision{allow: d.Allow, reasons: slices.Clone(d.Reasons), obs: slices.Clone(d.Obligations)}
	c.mu.Lock()
	defer c.mu.Unlock()
	makeRoom(c.m, c.max)
	c.m[k] = v
}

// makeRoom deletes an eighth of m's entries (at least one), arbitrary ones,
// when m holds max or more: a bound on memory, not an eviction policy.
func makeRoom[K comparable, V any](m map[K]V, max int) {
	if len(m) < max {
		return
	}
	n := (max + 7) / 8
	for key := range m {
		delete(m, key)
		if n--; n <= 0 {
			return
		}
	}
}

// appendField appends a length-prefixed string, so that no two different
// inputs encode alike.
func appendField(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

func appendList(b []byte, ss []string) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(len(ss)))
	for _, s := range ss {
		b = appendField(b, s)
	}
	return b
}

// digestBufs recycles the encoding buffers of the digests below (a
// principal with a large care team encodes to kilobytes, on every request).
var digestBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// sum256 is the SHA-256 of every digest below (a variable only so that a
// test can count them: TestSubjectMemoHitHashesNothing).
var sum256 = sha256.Sum256

// digest is SHA-256 over what encode appends to an empty buffer.
func digest(encode func([]byte) []byte) [32]byte {
	bp := digestBufs.Get().(*[]byte)
	b := encode((*bp)[:0])
	out := sum256(b)
	*bp = b
	digestBufs.Put(bp)
	return out
}

// principalDigest is SHA-256 over every principal field:
// SHA256(appendPrincipal(p)).
func principalDigest(p *Principal) [32]byte {
	return digest(func(b []byte) []byte { return appendPrincipal(b, p) })
}

// appendPrincipal appends the encoding of every principal field that
// principalDigest hashes.
func appendPrincipal(b []byte, p *Principal) []byte {
	b = appendField(b, "custos/policy/principal/v1")
	b = appendField(b, p.Sub)
	b = appendList(b, p.Roles)
	b = appendField(b, p.ClientID)
	b = appendField(b, p.Tenant)
	return appendList(b, p.Patients)
}

// numPrincipalFields is how many fields the principal document has.
const numPrincipalFields = 5

// principalFieldDigests hashes each field of p on its own, in the order of
// the subject cache's projection bits (sub, roles, client_id, tenant,
// patients), each under its own label so that no two fields hash alike.
func principalFieldDigests(p *Principal) [numPrincipalFields][32]byte {
	return [numPrincipalFields][32]byte{
		digest(func(b []byte) []byte { return appendField(appendField(b, "custos/policy/principal/sub/v1"), p.Sub) }),
		digest(func(b []byte) []byte { return appendList(appendField(b, "custos/policy/principal/roles/v1"), p.Roles) }),
		digest(func(b []byte) []byte {
			return appendField(appendField(b, "custos/policy/principal/client_id/v1"), p.ClientID)
		}),
		digest(func(b []byte) []byte {
			return appendField(appendField(b, "custos/policy/principal/tenant/v1"), p.Tenant)
		}),
		digest(func(b []byte) []byte {
			return appendList(appendField(b, "custos/policy/principal/patients/v1"), p.Patients)
		}),
	}
}

// cacheKey is SHA-256 over every field of the input document, or, when
// withURI is false (the policy cannot read the resource's URI:
// readsURI), over every field but that one.
func cacheKey(in *Input, withURI bool) [32]byte {
	var subj [32]byte
	if in.Subject != nil {
		subj = in.Subject.digest
	} else {
		subj = principalDigest(&in.Principal)
	}
	return digest(func(b []byte) []byte {
		if withURI {
			b = appendField(b, "custos/policy/input/v1")
		} else {
			b = appendField(b, "custos/policy/input-without-uri/v1")
		}
		b = append(b, subj[:]...)
		b = appendField(b, in.PurposeOfUse)
		b = appendField(b, string(in.Action))
		if r := in.Resource; r != nil {
			b = appendField(b, "resource")
			if withURI {
				b = appendField(b, r.URI)
			}
			b = appendField(b, r.Type)
			b = appendField(b, r.Patient)
			b = appendField(b, r.Tenant)
			b = appendList(b, r.Sensitivity)
			b = appendList(b, r.Consent)
		} else {
			b = appendField(b, "no resource")
		}
		if bg := in.BreakGlass; bg != nil {
			b = appendField(b, "break_glass")
			b = appendField(b, bg.Grant)
			b = appendField(b, bg.Patient)
		} else {
			b = appendField(b, "no break_glass")
		}
		return b
	})
}

// readsTheClock names builtins OPA does not mark nondeterministic whose
// result still depends on the time of the call (certificate validity is
// checked against the wall clock): a cached result could outlive an expiry.
var readsTheClock = map[string]bool{
	"crypto.x509.parse_and_verify_certificates":              true,
	"crypto.x509.parse_and_verify_certificates_with_options": true,
}

// deterministic reports whether no module calls a builtin OPA marks as
// nondeterministic; it names the first one found.
func deterministic(modules []*ast.Module) (bool, string) {
	found := ""
	check := func(ref ast.Ref) {
		if found != "" {
			return
		}
		name := ref.String()
		if b, ok := ast.BuiltinMap[name]; ok && (b.Nondeterministic || readsTheClock[name]) {
			found = name
		}
	}
	for _, m := range modules {
		ast.WalkExprs(m, func(e *ast.Expr) bool {
			if e.IsCall() {
				check(e.Operator())
			}
			return false
		})
		ast.WalkTerms(m, func(t *ast.Term) bool {
			if c, ok := t.Value.(ast.Call); ok && len(c) > 0 {
				if r, ok := c[0].Value.(ast.Ref); ok {
					check(r)
				}
			}
			return false
		})
	}
	return found == "", found
}
