package policy

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
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
// field of the input. Each hit is a new Decision with a fresh ID and copies
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
	if len(c.m) >= c.max {
		n := max(1, c.max/8) // a bound, not a policy: drop an eighth
		for key := range c.m {
			delete(c.m, key)
			if n--; n == 0 {
				break
			}
		}
	}
	c.m[k] = v
}

// writeField writes a length-prefixed string, so that no two different
// inputs hash alike.
func writeField(h hash.Hash, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	h.Write(n[:])
	h.Write([]byte(s))
}

func writeList(h hash.Hash, ss []string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(ss)))
	h.Write(n[:])
	for _, s := range ss {
		writeField(h, s)
	}
}

// principalDigest is SHA-256 over every principal field.
func principalDigest(p *Principal) [32]byte {
	h := sha256.New()
	writeField(h, "custos/policy/principal/v1")
	writeField(h, p.Sub)
	writeList(h, p.Roles)
	writeField(h, p.ClientID)
	writeField(h, p.Tenant)
	writeList(h, p.Patients)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// cacheKey is SHA-256 over every field of the input document.
func cacheKey(in *Input) [32]byte {
	h := sha256.New()
	writeField(h, "custos/policy/input/v1")
	var subj [32]byte
	if in.Subject != nil {
		subj = in.Subject.digest
	} else {
		subj = principalDigest(&in.Principal)
	}
	h.Write(subj[:])
	writeField(h, in.PurposeOfUse)
	writeField(h, string(in.Action))
	if r := in.Resource; r != nil {
		writeField(h, "resource")
		writeField(h, r.URI)
		writeField(h, r.Type)
		writeField(h, r.Patient)
		writeField(h, r.Tenant)
		writeList(h, r.Sensitivity)
		writeList(h, r.Consent)
	} else {
		writeField(h, "no resource")
	}
	if bg := in.BreakGlass; bg != nil {
		writeField(h, "break_glass")
		writeField(h, bg.Grant)
		writeField(h, bg.Patient)
	} else {
		writeField(h, "no break_glass")
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// deterministic reports whether no module calls a builtin OPA marks as
// nondeterministic; it names the first one found.
func deterministic(modules []*ast.Module) (bool, string) {
	found := ""
	check := func(ref ast.Ref) {
		if found != "" {
			return
		}
		if b, ok := ast.BuiltinMap[ref.String()]; ok && b.Nondeterministic {
			found = ref.String()
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
