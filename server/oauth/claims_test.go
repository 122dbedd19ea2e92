package oauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// parseClaimsReference is parseClaims as it was before scanClaims: it
// decodes the whole payload into a map[string]json.RawMessage, then each
// claim with encoding/json. It is kept as the definition of what
// parseClaims must do; FuzzParseClaimsEquivalent compares the two. (One
// change since, shared by both: act.sub is matched exactly, see actorSub.)
//
// It decodes a verified JWT payload. It checks types and required
// claims only; iss, aud and times are checked by the caller. Errors wrap
// ErrInvalid and name the claim, never its value.
func parseClaimsReference(payload []byte, n claimNames) (Claims, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(payload, &raw); err != nil || raw == nil {
		return Claims{}, fmt.Errorf("%w: payload is not a JSON object", ErrInvalid)
	}
	var c Claims
	bad := func(name string) error { return fmt.Errorf("%w: claim %q has the wrong type", ErrInvalid, name) }
	str := func(name string, dst *string) error {
		if v, ok := raw[name]; ok && !isNull(v) {
			if s, ok := plainString(v); ok {
				*dst = s
				return nil
			}
			if json.Unmarshal(v, dst) != nil {
				return bad(name)
			}
		}
		return nil
	}
	strs := func(name string, dst *[]string) error {
		if v, ok := raw[name]; ok && !isNull(v) {
			if json.Unmarshal(v, dst) != nil {
				return bad(name)
			}
		}
		return nil
	}
	date := func(name string, dst *time.Time) error {
		v, ok := raw[name]
		if !ok || isNull(v) {
			return nil
		}
		// v is a JSON value already validated by the map decode: a number
		// is exactly what ParseFloat accepts, anything else fails both.
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil || math.IsNaN(f) || f < 0 || f > 1<<40 {
			return bad(name)
		}
		*dst = time.Unix(int64(f), 0)
		return nil
	}
	var scope, scpString string
	var scp []string
	for _, err := range []error{
		str("iss", &c.Issuer), str("sub", &c.Subject), str("jti", &c.ID),
		audienceReference(raw["aud"], &c.Audience),
		date("exp", &c.Expiry), date("nbf", &c.NotBefore), date("iat", &c.IssuedAt),
		str("azp", &c.AuthorizedParty), str("client_id", &c.ClientIDClaim),
		clientReference(n.client, str, &c.OtherClient),
		str("scope", &scope),
		str(n.tenant, &c.Principal.Tenant), str(n.purpose, &c.PurposeOfUse),
		strs(n.roles, &c.Principal.Roles), strs(n.patients, &c.Principal.Patients),
	} {
		if err != nil {
			return Claims{}, err
		}
	}
	if v, ok := raw["scp"]; ok && !isNull(v) {
		if json.Unmarshal(v, &scp) != nil && json.Unmarshal(v, &scpString) != nil {
			return Claims{}, bad("scp")
		}
	}
	if v, ok := raw["act"]; ok && !isNull(v) {
		a, err := actorSub(v)
		if err != nil {
			return Claims{}, bad("act")
		}
		c.Actor = a
	}
	switch {
	case scope != "":
		c.Scopes = strings.Fields(scope)
	case scp != nil:
		c.Scopes = scp
	default:
		c.Scopes = strings.Fields(scpString)
	}
	if c.Scopes == nil {
		c.Scopes = []string{}
	}
	if c.Principal.Roles == nil {
		c.Principal.Roles = []string{}
	}
	if c.Principal.Patients == nil {
		c.Principal.Patients = []string{}
	}
	c.Principal.Sub = c.Subject
	c.Principal.ClientID = cmpOr(c.AuthorizedParty, c.ClientIDClaim, c.OtherClient, c.Actor)
	switch {
	case c.Subject == "":
		return Claims{}, fmt.Errorf("%w: claim \"sub\" is missing", ErrInvalid)
	case c.Expiry.IsZero():
		return Claims{}, fmt.Errorf("%w: claim \"exp\" is missing", ErrInvalid)
	case c.Principal.Tenant == "":
		return Claims{}, fmt.Errorf("%w: claim %q is missing", ErrInvalid, n.tenant)
	case c.Principal.ClientID == "":
		return Claims{}, noClientIdentity(n)
	}
	return c, nil
}

// clientReference decodes the configured client claim, if one is
// configured (a member named "" is no client claim).
func clientReference(name string, str func(string, *string) error, dst *string) error {
	if name == "" {
		return nil
	}
	return str(name, dst)
}

// audienceReference is audience before its fast paths. It decodes "aud": a string or an array of strings (RFC 7519 §4.1.3).
func audienceReference(v json.RawMessage, dst *[]string) error {
	if v == nil || isNull(v) {
		return nil
	}
	var one string
	if json.Unmarshal(v, &one) == nil {
		*dst = []string{one}
		return nil
	}
	if json.Unmarshal(v, dst) != nil {
		return fmt.Errorf("%w: claim \"aud\" has the wrong type", ErrInvalid)
	}
	return nil
}

// TestParseClaimsKeys pins how claim names are matched: after JSON
// unescaping, case-sensitively, the last duplicate winning, configurable
// names included.
func TestParseClaimsKeys(t *testing.T) {
	def := claimNames{roles: "roles", tenant: "tenant", patients: "patients", purpose: "purpose_of_use"}
	const rest = `"exp":1,"tenant":"t","azp":"c"`
	for _, tc := range []struct {
		name    string
		names   claimNames
		payload string
		sub     string   // want Subject, if no error
		roles   []string // want Principal.Roles, if no error
		err     string   // want error text, "" for none
	}{
		{"plain", def, `{"sub":"a",` + rest + `,"roles":["r","s"]}`, "a", []string{"r", "s"}, ""},
		{"escaped key", def, `{"s\u0075b":"a",` + rest + `,"\u0072oles":["r"]}`, "a", []string{"r"}, ""},
		{"escaped values", def, `{"sub":"a\"b",` + rest + `,"roles":["\u00e9", "x\ty"]}`, "a\"b", []string{"é", "x\ty"}, ""},
		{"upper case is another claim", def, `{"SUB":"a",` + rest + `}`, "", nil, `oauth: invalid token: claim "sub" is missing`},
		{"last duplicate wins", def, `{"sub":"a","sub":"b",` + rest + `,"roles":["x"],"roles":[]}`, "b", []string{}, ""},
		{"last duplicate wins even if bad", def, `{"sub":"a",` + rest + `,"sub":1}`, "", nil, `oauth: invalid token: claim "sub" has the wrong type`},
		{"escaped duplicate wins", def, `{"sub":"a",` + rest + `,"su\u0062":"z"}`, "z", []string{}, ""},
		{"null is absent", def, `{"sub":"a",` + rest + `,"roles":null}`, "a", []string{}, ""},
		{"null in roles", def, `{"sub":"a",` + rest + `,"roles":["r",null]}`, "a", []string{"r", ""}, ""},
		{"roles not strings", def, `{"sub":"a",` + rest + `,"roles":["r",1]}`, "", nil, `oauth: invalid token: claim "roles" has the wrong type`},
		{"nested look-alike ignored", def, `{"x":{"sub":"evil","roles":["admin"]},"sub":"a",` + rest + `}`, "a", []string{}, ""},
		{"roles named sub", claimNames{roles: "sub", tenant: "tenant", patients: "patients", purpose: "p"},
			`{"sub":"a",` + rest + `}`, "", nil, `oauth: invalid token: claim "sub" has the wrong type`},
		{"tenant named sub", claimNames{roles: "roles", tenant: "sub", patients: "patients", purpose: "p"},
			`{"sub":"a","exp":1,"azp":"c"}`, "a", []string{}, ""},
		{"invalid UTF-8 key is U+FFFD", claimNames{roles: "\uFFFD", tenant: "tenant", patients: "patients", purpose: "p"},
			"{\"sub\":\"a\"," + rest + ",\"\xff\":[\"r\"]}", "a", []string{"r"}, ""},
		{"whitespace", def, " {\n\"sub\" : \"a\" ,\t\"exp\":1, \"tenant\":\"t\",\"azp\":\"c\",\"roles\" : [ \"r\" , \"s\" ] }\r\n", "a", []string{"r", "s"}, ""},
		{"act.sub is the client", def, `{"sub":"a","exp":1,"tenant":"t","act":{"sub":"agent"}}`, "a", []string{}, ""},
		{"act.SUB is not act.sub", def, `{"sub":"a","exp":1,"tenant":"t","act":{"SUB":"agent"}}`, "", nil,
			`oauth: invalid token: no client identity (azp, client_id or act.sub)`},
		{"act not an object", def, `{"sub":"a",` + rest + `,"act":"agent"}`, "", nil, `oauth: invalid token: claim "act" has the wrong type`},
		{"top-level array", def, `[{"sub":"a",` + rest + `}]`, "", nil, `oauth: invalid token: payload is not a JSON object`},
		{"null", def, `null`, "", nil, `oauth: invalid token: payload is not a JSON object`},
		{"nesting at the limit", def, `{"sub":"a",` + rest + `,"x":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`, "a", []string{}, ""},
		{"nesting too deep", def, `{"sub":"a",` + rest + `,"x":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`, "", nil, `oauth: invalid token: payload is not a JSON object`},
		{"trailing garbage", def, `{"sub":"a",` + rest + `}x`, "", nil, `oauth: invalid token: payload is not a JSON object`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseClaims([]byte(tc.payload), tc.names)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err || !errors.Is(err, ErrInvalid) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Subject != tc.sub || !reflect.DeepEqual(c.Principal.Roles, tc.roles) {
				t.Fatalf("sub %q roles %q, want %q %q", c.Subject, c.Principal.Roles, tc.sub, tc.roles)
			}
		})
	}
}

// TestPlainStrings: the fast path for arrays of strings agrees with
// encoding/json wherever it accepts, and declines what it can not decode
// by itself.
func TestPlainStrings(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{`[]`, true}, {` [ ] `, false}, {`[ ]`, true}, {`["a"]`, true}, {`[ "a" , "b" ]`, true}, {`["", ""]`, true},
		{`["a\"b"]`, false}, {`["\u00e9"]`, false}, {"[\"\xff\"]", false}, {`[null]`, false}, {`["a",1]`, false},
		{`[["a"]]`, false}, {`"a"`, false}, {`null`, false}, {`[`, false}, {`["a"`, false}, {`["a",`, false}, {`["a" x`, false},
	} {
		got, ok := plainStrings([]byte(tc.in))
		if ok != tc.ok {
			t.Errorf("plainStrings(%q) ok = %v, want %v", tc.in, ok, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		var want []string
		if err := json.Unmarshal([]byte(tc.in), &want); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("plainStrings(%q) = %#v; encoding/json: %#v, %v", tc.in, got, want, err)
		}
	}
}
