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
		// Any R4 type in the Patient compartment.
		{"fhir://gh/patients/" + tPatient + "/documentreference/" + tID, URI{"fhir", "gh", tPatient, "documentreference", tID}},
		{"fhir://gh/patients/" + tPatient + "/procedure/" + tID, URI{"fhir", "gh", tPatient, "procedure", tID}},
		{"fhir://gh/patients/" + tPatient + "/allergyintolerance/" + tID, URI{"fhir", "gh", tPatient, "allergyintolerance", tID}},
		// Tenant-level reference data.
		{"fhir://gh/organization/" + tID, URI{"fhir", "gh", "", "organization", tID}},
		{"fhir://gh/practitioner/" + tID, URI{"fhir", "gh", "", "practitioner", tID}},
		{"fhir://gh/medication/" + tID, URI{"fhir", "gh", "", "medication", tID}},
		// Attachments, of a patient and of the tenant.
		{"attachment://gh/patients/" + tPatient + "/attachments/" + tID, URI{"attachment", "gh", tPatient, "attachment", tID}},
		{"attachment://gh/attachments/" + tID, URI{"attachment", "gh", "", "attachment", tID}},
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
		{"unknown fhir type", pre + "/procedures/" + tID, "unknown fhir resource type", ""},
		{"abstract fhir type", pre + "/domainresource/" + tID, "unknown fhir resource type", ""},
		{"tenant-level unknown type", "fhir://general-hospital/widget/" + tID, "unknown fhir resource type", ""},
		{"tenant-level patients", "fhir://general-hospital/patients/" + tPatient, "unknown fhir resource type", ""},
		{"tenant-level patient", "fhir://general-hospital/patient/" + tID, "a patient resource has a patients segment", ""},
		{"tenant-level camel type", "fhir://general-hospital/Organization/" + tID, "unknown fhir resource type", ""},
		{"tenant-level id not uuid", "fhir://general-hospital/organization/MRN123456", "id is not a canonical uuid", "MRN123456"},
		{"tenant-level note", "note://general-hospital/notes/" + tID, "uri has the wrong number of path segments (note resources belong to a patient)", ""},
		{"tenant-level image", "image://general-hospital/images/" + tID, "uri has the wrong number of path segments", ""},
		{"one segment", "fhir://general-hospital/" + tID, "uri has the wrong number of path segments", ""},
		{"three segments", "fhir://general-hospital/organization/" + tID + "/x", "uri has the wrong number of path segments", ""},
		{"attachment wrong collection", "attachment://general-hospital/patients/" + tPatient + "/notes/" + tID, "collection segment is not attachments", ""},
		{"attachment tenant wrong collection", "attachment://general-hospital/binary/" + tID, "collection segment is not attachments", ""},
		{"attachment source id", "attachment://general-hospital/attachments/doc-17", "id is not a canonical uuid", "doc-17"},
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
	examples := map[string]URI{
		"fhir-resource":     {Scheme: "fhir", Tenant: "gh", Patient: tPatient, Type: "coverage", ID: tID},
		"fhir-reference":    {Scheme: "fhir", Tenant: "gh", Type: "organization", ID: tID},
		"clinical-note":     {Scheme: "note", Tenant: "gh", Patient: tPatient, Type: "note", ID: tID},
		"lab-report":        {Scheme: "report", Tenant: "gh", Patient: tPatient, Type: "report", ID: tID},
		"clinical-image":    {Scheme: "image", Tenant: "gh", Patient: tPatient, Type: "image", ID: tID},
		"attachment":        {Scheme: "attachment", Tenant: "gh", Patient: tPatient, Type: "attachment", ID: tID},
		"tenant-attachment": {Scheme: "attachment", Tenant: "gh", Type: "attachment", ID: tID},
	}
	if len(ts) != len(examples) {
		t.Fatalf("got %d templates, want %d", len(ts), len(examples))
	}
	seen := map[string]bool{}
	for _, tp := range ts {
		u, ok := examples[tp.Name]
		if !ok || seen[tp.Name] {
			t.Fatalf("unexpected or repeated template %q", tp.Name)
		}
		seen[tp.Name] = true
		if tp.Title == "" || tp.Description == "" {
			t.Errorf("template %q lacks title/description", tp.URITemplate)
		}
		if tp.MIMEType != u.MIMEType() {
			t.Errorf("template %q mime %q, want %q", tp.URITemplate, tp.MIMEType, u.MIMEType())
		}
		if strings.Contains(tp.URITemplate, "{patient}") != (u.Patient != "") {
			t.Errorf("template %q and its example disagree on the patient", tp.URITemplate)
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

// TestFHIRTypes checks the generated R4 type table: every concrete R4 type,
// lowercased, with its resourceType spelling; no abstract type.
func TestFHIRTypes(t *testing.T) {
	if n := len(fhirTypes); n != 147 {
		t.Errorf("%d R4 resource types, want 147 (FHIR 4.0.1)", n)
	}
	for lower, name := range fhirTypes {
		if strings.ToLower(name) != lower {
			t.Errorf("%q -> %q", lower, name)
		}
	}
	for _, typ := range []string{"patient", "observation", "documentreference", "binary", "organization", "medicationrequest", "coverage"} {
		if !IsFHIRType(typ) {
			t.Errorf("IsFHIRType(%q) = false", typ)
		}
	}
	for _, typ := range []string{"resource", "domainresource", "Patient", "", "note", "attachment"} {
		if IsFHIRType(typ) {
			t.Errorf("IsFHIRType(%q) = true", typ)
		}
	}
	if got := FHIRResourceType("documentreference"); got != "DocumentReference" {
		t.Errorf("FHIRResourceType = %q", got)
	}
}

// FuzzParseURI checks that accepted URIs are canonical (round-trip exactly)
// and can carry neither userinfo, query, fragment nor percent-encoding.
func FuzzParseURI(f *testing.F) {
	f.Add("fhir://general-hospital/patients/" + tPatient + "/observation/" + tID)
	f.Add("note://t/patients/" + tPatient + "/notes/" + tID)
	f.Add("fhir://t/organization/" + tID)
	f.Add("attachment://t/attachments/" + tID)
	f.Add("attachment://t/patients/" + tPatient + "/attachments/" + tID)
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
		if u.Patient == "" && !families[u.Scheme].tenantLevel {
			t.Fatalf("accepted %q without a patient", raw)
		}
		if u.Scheme == SchemeFHIR && !IsFHIRType(u.Type) {
			t.Fatalf("accepted %q with a type outside R4", raw)
		}
		u2, err := ParseURI(u.String())
		if err != nil || u2 != u {
			t.Fatalf("reparse: %+v, %v", u2, err)
		}
	})
}
