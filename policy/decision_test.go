package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// TestParseDecisionChecksKeysWithoutAllocating: the check that a decision
// has no key but allow, reasons and obligations makes nothing on the way
// of a well-formed decision (00b3c96's check made a slice of the keys for
// every decision), and still names the first unknown key in sorted order.
func TestParseDecisionChecksKeysWithoutAllocating(t *testing.T) {
	allowOnly := ast.MustParseTerm(`{"allow": true}`).Value
	if n := testing.AllocsPerRun(100, func() {
		if _, _, _, err := parseDecision(allowOnly); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("parseDecision(%v) made %v allocations, want 0", allowOnly, n)
	}

	for _, tc := range []struct {
		decision, unknown string
	}{
		{`{"allow": true, "reasons": [], "obligations": [], "zeta": 1, "beta": 2}`, `"beta"`},
		{`{"allow": true, "obligation": []}`, `"obligation"`},
		{`{"allow": true, "reasons": ["ok"], "Obligations": []}`, `"Obligations"`},
		{`{"reasons": ["ok"], "allowed": true}`, `"allowed"`},
	} {
		_, _, _, err := parseDecision(ast.MustParseTerm(tc.decision).Value)
		if !errors.Is(err, ErrBadShape) || !strings.Contains(err.Error(), "unknown key "+tc.unknown) {
			t.Errorf("parseDecision(%s) = %v, want %v naming unknown key %s", tc.decision, err, ErrBadShape, tc.unknown)
		}
	}
	for _, ok := range []string{`{"allow": false}`, `{"allow": true, "reasons": ["a"]}`, `{"allow": true, "reasons": [], "obligations": [{"op": "remove", "path": "/name"}]}`} {
		if _, _, _, err := parseDecision(ast.MustParseTerm(ok).Value); err != nil {
			t.Errorf("parseDecision(%s) = %v, want no error", ok, err)
		}
	}
}
