package oauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
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

// equivalenceNames are the claimNames settings FuzzParseClaimsEquivalent
// tries every input with: the defaults, configurable names that collide
// with fixed ones, and names that only match keys after unescaping or
// U+FFFD replacement of invalid UTF-8.
var equivalenceNames = []claimNames{
	{roles: "roles", tenant: "tenant", patients: "patients", purpose: "purpose_of_use"},
	{roles: "sub", tenant: "iss", patients: "aud", purpose: "scope"},
	{roles: "act", tenant: "\uFFFD", patients: "scp", purpose: "exp"},
	{roles: "r\u00f4les", tenant: "azp", patients: "r\u00f4les", purpose: "azp"},
	{roles: "roles", tenant: "tenant", patients: "patients", purpose: "purpose_of_use", client: "cid"},
	{roles: "roles", tenant: "appid", patients: "patients", purpose: "purpose_of_use", client: "appid"},
	{roles: "roles", tenant: "tenant", patients: "patients", purpose: "purpose_of_use", client: "client_id"},
}

// FuzzParseClaimsEquivalent: parseClaims (the scanner) and
// parseClaimsReference (the map decode it replaced) give identical claims
// and identical errors for any payload and several claim name settings.
func FuzzParseClaimsEquivalent(f *testing.F) {
	f.Add([]byte(`{"iss":"https://as","sub":"dr.alice","aud":["x","y"],"exp":1700000000,"nbf":1,"iat":1,"jti":"j","azp":"c","scope":"a b","roles":["r"],"tenant":"t","patients":["p"],"purpose_of_use":"TREAT"}`))
	f.Add([]byte(`{"iss":"https://as","sub":"dr.alice","aud":"x","exp":1700000000,"cid":"0oa1","appid":"a","":"e","scp":["a"],"tenant":"t"}`))
	f.Add([]byte(`{"iss":"https://as","sub":"dr.alice","aud":"x","exp":1700000000,"cid":5,"tenant":"t"}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		for _, n := range equivalenceNames {
			got, gotErr := parseClaims(payload, n)
			want, wantErr := parseClaimsReference(payload, n)
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				t.Fatalf("names %+v, payload %q:\nerror %v\nwant  %v", n, payload, gotErr, wantErr)
			}
			if gotErr != nil && !errors.Is(gotErr, ErrInvalid) {
				t.Fatalf("names %+v, payload %q: error %v does not wrap ErrInvalid", n, payload, gotErr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("names %+v, payload %q:\nclaims %#v\nwant   %#v", n, payload, got, want)
			}
		}
	})
}
