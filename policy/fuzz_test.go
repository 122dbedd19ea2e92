package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// FuzzParseDecision feeds arbitrary JSON documents, standing in for what a
// policy may produce, to the decision parser. It must never panic; it either
// rejects the document with ErrBadShape or ErrBadObligation, or returns only
// obligations that validate.
func FuzzParseDecision(f *testing.F) {
	f.Add([]byte(`{"allow": true, "reasons": ["clinician_care_team"], "obligations": []}`))
	f.Add([]byte(`{"allow": true, "reasons": ["billing_payment"], "obligations": [{"op": "mask", "path": "/subscriberId", "fn": "last4"}]}`))
	f.Add([]byte(`{"allow": "true"}`))
	f.Add([]byte(`{"allow": false, "obligations": [{"op": "encrypt", "path": "/name"}]}`))
	f.Add([]byte(`[1, 2]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var x any
		if err := dec.Decode(&x); err != nil {
			return
		}
		v, err := ast.InterfaceToValue(x)
		if err != nil {
			return
		}
		allow, reasons, obs, err := parseDecision(v)
		if err != nil {
			if !errors.Is(err, ErrBadShape) && !errors.Is(err, ErrBadObligation) {
				t.Fatalf("error %v wraps neither ErrBadShape nor ErrBadObligation", err)
			}
			if allow || reasons != nil || obs != nil {
				t.Fatalf("error %v with non-zero results", err)
			}
			return
		}
		for _, o := range obs {
			if err := o.Validate(); err != nil {
				t.Fatalf("accepted invalid obligation %v: %v", o, err)
			}
		}
		if _, ok := x.(map[string]any)["allow"].(bool); !ok {
			t.Fatal("accepted a decision without a boolean allow")
		}
	})
}
