package oauth

import (
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
