package oauth

import (
	"encoding/json"
	"testing"
)

// FuzzParseClaims: parseClaims never panics, and whatever it accepts has
// the required claims and non-nil lists.
func FuzzParseClaims(f *testing.F) {
	f.Add([]byte(`{"sub":"a","exp":1,"tenant":"t","azp":"c","aud":["x"],"scope":"a b","roles":["r"]}`))
	f.Add([]byte(`{"sub":"a","exp":1.5,"tenant":"t","act":{"sub":"agent"},"scp":"x y"}`))
	f.Add([]byte(`[]`))
	n := claimNames{roles: "roles", tenant: "tenant", patients: "patients", purpose: "purpose_of_use"}
	f.Fuzz(func(t *testing.T, payload []byte) {
		c, err := parseClaims(payload, n)
		if err != nil {
			return
		}
		if c.Subject == "" || c.Principal.Sub != c.Subject || c.Expiry.IsZero() || c.Principal.Tenant == "" ||
			c.Principal.ClientID == "" || c.Scopes == nil || c.Principal.Roles == nil || c.Principal.Patients == nil {
			t.Fatalf("accepted incomplete claims %+v", c)
		}
	})
}

// FuzzPlainString: the fast path for claim strings agrees with
// encoding/json on every JSON value it accepts.
func FuzzPlainString(f *testing.F) {
	for _, s := range []string{`"dr.alice"`, `"a\"b"`, `"\u00e9t\u00e9"`, `"été"`, "\"\xff\"", `""`, `"`, `12`, `null`, `["a"]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		if !json.Valid(v) {
			return // parseClaims only passes values of a validated document
		}
		got, ok := plainString(v)
		if !ok {
			return
		}
		var want string
		if err := json.Unmarshal(v, &want); err != nil || got != want {
			t.Fatalf("plainString(%q) = %q; encoding/json: %q, %v", v, got, want, err)
		}
	})
}
