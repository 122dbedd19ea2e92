package store

import (
	"errors"
	"strings"
	"testing"
)

const (
	tPatient = "0b5c1f7e-3c2a-4d7e-9f10-2a3b4c5d6e7f"
	tID      = "3f2a9c1e-8b7d-4e6f-a5b4-c3d2e1f0a9b8"
)

func TestParseURIValid(t *testing.T) {
	tests := []struct {
		raw  string
		want URI
	}{
		{"fhir://general-hospital/patients/" + tPatient + "/patient/" + tID, URI{"fhir", "general-hospital", tPatient, "patient", tID}},
		{"fhir://general-hospital/patients/" + tPatient + "/observation/" + tID, URI{"fhir", "general-hospital", tPatient, "observation", tID}},
		{"fhir://t/patients/" + tPatient + "/condition/" + tID, URI{"fhir", "t", tPatient, "condition", tID}},
		{"fhir://t1/patients/" + tPatient + "/medicationrequest/" + tID, URI{"fhir", "t1", tPatient, "medicationrequest", tID}},
		{"fhir://0/patients/" + tPatient + "/encounter/" + tID, URI{"fhir", "0", tPatient, "encounter", tID}},
		{"fhir://a-b-c/patients/" + tPatient + "/coverage/" + tID, URI{"fhir", "a-b-c", tPatient, "coverage", tID}},
		{"note://general-hospital/patients/" + tPatient + "/notes/" + tID, URI{"note", "general-hospital", tPatient, "note", tID}},
		{"report://general-hospital/patients/" + tPatient + "/reports/" + tID, URI{"report", "general-hospital", tPatient, "report", tID}},
		{"image://general-hospital/patients/" + tPatient + "/images/" + tID, URI{"image", "general-hospital", tPatient, "image", tID}},
		{"fhir://" + strings.Repeat("a", 63) + "/patients/" + tPatient + "/patient/" + tID, URI{"fhir", strings.Repeat("a", 63), tPatient, "patient", tID}},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			got, err := ParseURI(tt.raw)
			if err != nil {
				t.Fatalf("ParseURI: %v", err)
			}
			if got != tt.want {
				t.Fatalf("ParseURI = %+v, want %+v", got, tt.want)
			}
			if s := got.String(); s != tt.raw {
				t.Fatalf("String() = %q, want %q", s, tt.raw)
			}
		})
	}
}

func TestParseURIRejects(t *testing.T) {
	const pre = "fhir://general-hospital/patients/" + tPatient
	good := pre + "/observation/" + tID
	tests := []struct {
		name, raw, reason string
		secret            string // must not appear in the error
	}{
		{"empty", "", "uri is empty", ""},
		{"uppercase scheme", "FHIR" + good[4:], "scheme is not lowercase", ""},
		{"mixed case scheme", "Fhir" + good[4:], "scheme is not lowercase", ""},
		{"unknown scheme", "http" + good[4:], "unknown scheme", ""},
		{"no scheme", "general-hospital/patients/" + tPatient, "uri has no scheme", ""},
		{"userinfo", "fhir://hunter2:pw@general-hospital/patients/" + tPatient + "/observation/" + tID, "uri has userinfo", "hunter2"},
		{"userinfo token only", "fhir://tok3n@general-hospital/patients/" + tPatient + "/observation/" + tID, "uri has userinfo", "tok3n"},
		{"port", "fhir://general-hospital:8443/patients/" + tPatient + "/observation/" + tID, "uri has a port", "8443"},
		{"query token", good + "?token=s3cret", "uri has a credential-like query parameter", "s3cret"},
		{"query access_token", good + "?page=2&access_token=hvs.CAES", "uri has a credential-like query parameter", "hvs.CAES"},
		{"query presigned", good + "?X-Amz-Signature=abc123def", "uri has a credential-like query parameter", "abc123def"},
		{"query password", good + "?user=a;Password=pw-canary", "uri has a credential-like query parameter", "pw-canary"},
		{"query api-key", good + "?api-key=k3y", "uri has a credential-like query parameter", "k3y"},
		{"query vault token", good + "?x_vault_token=s.abc", "uri has a credential-like query parameter", "s.abc"},
		{"query other", good + "?page=2", "uri has a query string", ""},
		{"empty query", good + "?", "uri has a query string", ""},
		{"fragment", good + "#s3cr3t", "uri has a fragment", "s3cr3t"},
		{"percent", "fhir://general-hospital/patients/" + tPatient + "/observation/%33f2a9c1e-8b7d-4e6f-a5b4-c3d2e1f0a9b", "uri has percent-encoding", ""},
		{"empty tenant", "fhir:///patients/" + tPatient + "/observation/" + tID, "tenant is empty", ""},
		{"uppercase tenant", "fhir://General-Hospital/patients/" + tPatient + "/observation/" + tID, "tenant is not valid", ""},
		{"tenant leading dash", "fhir://-gh/patients/" + tPatient + "/observation/" + tID, "tenant is not valid", ""},
		{"tenant underscore", "fhir://g_h/patients/" + tPatient + "/observation/" + tID, "tenant is not valid", ""},
		{"tenant dot", "fhir://g.h/patients/" + tPatient + "/observation/" + tID, "tenant is not valid", ""},
		{"tenant too long", "fhir://" + strings.Repeat("a", 64) + "/patients/" + tPatient + "/observation/" + tID, "tenant is not valid", ""},
		{"no path", "fhir://general-hospital", "uri has no path", ""},
		{"root path", "fhir://general-hospital/", "uri has no path", ""},
		{"trailing slash", good + "/", "uri has a trailing slash", ""},
		{"empty segment", pre + "//observation/" + tID, "uri has an empty path segment", ""},
		{"dot segment", pre + "/./observation/" + tID, "uri has a dot segment", ""},
		{"dotdot segment", pre + "/observation/../observation/" + tID, "uri has a dot segment", ""},
		{"extra segment", good + "/extra", "uri has the wrong number of path segments", ""},
		{"missing segment", pre + "/observation", "uri has the wrong number of path segments", ""},
		{"not patients", "fhir://general-hospital/people/" + tPatient + "/observation/" + tID, "first path segment is not patients", ""},
		{"patient name", "fhir://general-hospital/patients/jane-doe/observation/" + tID, "patient is not a canonical uuid", "jane"},
		{"patient mrn", "fhir://general-hospital/patients/MRN123456/observation/" + tID, "patient is not a canonical uuid", "MRN123456"},
		{"uppercase patient uuid", "fhir://general-hospital/patients/" + strings.ToUpper(tPatient) + "/observation/" + tID, "patient is not a canonical uuid", ""},
		{"unknown fhir type", pre + "/procedure/" + tID, "unknown fhir resource type", ""},
		{"camel fhir type", pre + "/Observation/" + tID, "unknown fhir resource type", ""},
		{"wrong collection", "note://general-hospital/patients/" + tPatient + "/reports/" + tID, "collection segment is not notes", ""},
		{"note with fhir type", "note://general-hospital/patients/" + tPatient + "/observation/" + tID, "collection segment is not notes", ""},
		{"id not uuid", pre + "/observation/12345", "id is not a canonical uuid", ""},
		{"id uppercase", pre + "/observation/" + strings.ToUpper(tID), "id is not a canonical uuid", ""},
		{"id braces", pre + "/observation/{" + tID[:34] + "}", "id is not a canonical uuid", ""},
		{"id no dashes", pre + "/observation/" + strings.ReplaceAll(tID, "-", "") + "abcd", "id is not a canonical uuid", ""},
		{"id urn", pre + "/observation/urn:uuid:" + tID, "id is not a canonical uuid", ""},
		{"too long", good + strings.Repeat("a", MaxURILength), "uri is too long", ""},
		{"space", "fhir://general-hospital/patients/" + tPatient + "/observation/ " + tID, "uri contains whitespace or control characters", ""},
		{"newline", good + "\n", "uri contains whitespace or control characters", ""},
		{"nul", good + "\x00", "uri contains whitespace or control characters", ""},
		{"del", good + "\x7f", "uri contains whitespace or control characters", ""},
		{"non-ascii", "fhir://général/patients/" + tPatient + "/observation/" + tID, "uri contains non-ascii characters", ""},
		{"backslash", pre + "\\observation\\" + tID, "uri contains a backslash", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseURI(tt.raw)
			if err == nil {
				t.Fatalf("ParseURI(%q) succeeded, want error", tt.raw)
			}
			if !errors.Is(err, ErrBadURI) {
				t.Fatalf("error %v does not wrap ErrBadURI", err)
			}
			var ue *URIError
			if !errors.As(err, &ue) {
				t.Fatalf("error %T is not a *URIError", err)
			}
			if !strings.HasPrefix(ue.Reason, tt.reason) {
				t.Fatalf("reason = %q, want prefix %q", ue.Reason, tt.reason)
			}
			if tt.secret != "" && strings.Contains(err.Error(), tt.secret) {
				t.Fatalf("error %q echoes input %q", err, tt.secret)
			}
			// Nothing of the input is echoed at all.
			if strings.Contains(err.Error(), tPatient) || strings.Contains(err.Error(), "general-hospital") {
				t.Fatalf("error %q echoes the input", err)
			}
		})
	}
}

func TestTemplates(t *testing.T) {
	ts := Templates()
	if len(ts) != 4 {
		t.Fatalf("got %d templates, want 4", len(ts))
	}
	examples := map[string]URI{
		"fhir":   {Scheme: "fhir", Tenant: "gh", Patient: tPatient, Type: "coverage", ID: tID},
		"note":   {Scheme: "note", Tenant: "gh", Patient: tPatient, Type: "note", ID: tID},
		"report": {Scheme: "report", Tenant: "gh", Patient: tPatient, Type: "report", ID: tID},
		"image":  {Scheme: "image", Tenant: "gh", Patient: tPatient, Type: "image", ID: tID},
	}
	seen := map[string]bool{}
	for _, tp := range ts {
		scheme, _, ok := strings.Cut(tp.URITemplate, "://")
		if !ok {
			t.Fatalf("template %q has no scheme", tp.URITemplate)
		}
		u, ok := examples[scheme]
		if !ok || seen[scheme] {
			t.Fatalf("unexpected or repeated template scheme %q", scheme)
		}
		seen[scheme] = true
		if tp.Name == "" || tp.Title == "" || tp.Description == "" {
			t.Errorf("template %q lacks name/title/description", tp.URITemplate)
		}
		if tp.MIMEType != u.MIMEType() {
			t.Errorf("template %q mime %q, want %q", tp.URITemplate, tp.MIMEType, u.MIMEType())
		}
		// Level-1 expansion of the template must give the canonical URI.
		exp := strings.NewReplacer("{tenant}", u.Tenant, "{patient}", u.Patient, "{type}", u.Type, "{id}", u.ID).Replace(tp.URITemplate)
		if exp != u.String() {
			t.Errorf("expansion %q != %q", exp, u.String())
		}
		if _, err := ParseURI(exp); err != nil {
			t.Errorf("expansion of %q does not parse: %v", tp.URITemplate, err)
		}
	}
}

// FuzzParseURI checks that accepted URIs are canonical (round-trip exactly)
// and can carry neither userinfo, query, fragment nor percent-encoding.
func FuzzParseURI(f *testing.F) {
	f.Add("fhir://general-hospital/patients/" + tPatient + "/observation/" + tID)
	f.Add("note://t/patients/" + tPatient + "/notes/" + tID)
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := ParseURI(raw)
		if err != nil {
			if !errors.Is(err, ErrBadURI) {
				t.Fatalf("error does not wrap ErrBadURI: %v", err)
			}
			return
		}
		if s := u.String(); s != raw {
			t.Fatalf("round trip: %q -> %q", raw, s)
		}
		if strings.ContainsAny(raw, "@?#%") {
			t.Fatalf("accepted %q with userinfo/query/fragment/percent", raw)
		}
		if len(raw) > MaxURILength {
			t.Fatalf("accepted a URI of %d bytes", len(raw))
		}
		u2, err := ParseURI(u.String())
		if err != nil || u2 != u {
			t.Fatalf("reparse: %+v, %v", u2, err)
		}
	})
}
