package store

import (
	"errors"
	"strings"
	"testing"
)

func TestParsePageURI(t *testing.T) {
	note := "note://gh/patients/" + tPatient + "/notes/" + tID
	for _, tc := range []struct {
		raw    string
		page   int
		reason string // "" = accepted
	}{
		{note + "/pages/1", 1, ""},
		{note + "/pages/42", 42, ""},
		{note + "/pages/99999", 99999, ""},
		{note, 0, "uri is not a page uri (no /pages/ segment)"},
		{note + "/pages/0", 0, "page is not a decimal number from 1 to 99999 without leading zeros"},
		{note + "/pages/01", 0, "page is not a decimal number from 1 to 99999 without leading zeros"},
		{note + "/pages/100000", 0, "page is not a decimal number from 1 to 99999 without leading zeros"},
		{note + "/pages/-1", 0, "page is not a decimal number from 1 to 99999 without leading zeros"},
		{note + "/pages/", 0, "page is not a decimal number from 1 to 99999 without leading zeros"},
		{note + "/pages/1/", 0, "page is not a decimal number from 1 to 99999 without leading zeros"},
		{note + "/pages/1?token=s3cret", 0, "page is not a decimal number from 1 to 99999 without leading zeros"},
		{note + "/pages/2/pages/1", 0, "uri has the wrong number of path segments"},
		{"fhir://gh/patients/" + tPatient + "/observation/" + tID + "/pages/1", 0, "resource family has no pages"},
		{"report://gh/patients/" + tPatient + "/reports/" + tID + "/pages/1", 0, "resource family has no pages"},
		{"fhir://gh/organization/" + tID + "/pages/1", 0, "resource family has no pages"},
		{"attachment://gh/patients/" + tPatient + "/attachments/" + tID + "/pages/1", 0, "resource family has no pages"},
		{"attachment://gh/attachments/" + tID + "/pages/1", 0, "resource family has no pages"},
		{"note://gh/notes/" + tID + "/pages/1", 0, "uri has the wrong number of path segments (note resources belong to a patient)"},
		{"note://gh/patients/jane-doe/notes/" + tID + "/pages/1", 0, "patient is not a canonical uuid"},
		{note + "/pages/1" + strings.Repeat("0", 300), 0, "uri is too long"},
	} {
		p, err := ParsePageURI(tc.raw)
		if tc.reason == "" {
			if err != nil || p.Page != tc.page || p.String() != tc.raw || p.URI.String() != note {
				t.Errorf("ParsePageURI(%q) = %+v, %v", tc.raw, p, err)
			}
			if _, err := ParseURI(tc.raw); err == nil {
				t.Errorf("ParseURI accepts the page uri %q: it must never be a catalog key", tc.raw)
			}
			continue
		}
		var ue *URIError
		if !errors.As(err, &ue) || !errors.Is(err, ErrBadURI) || ue.Reason != tc.reason {
			t.Errorf("ParsePageURI(%q): got %v, want reason %q", tc.raw, err, tc.reason)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error echoes the input: %v", err)
		}
	}
}

func TestPageTemplatesExpandToPageURIs(t *testing.T) {
	ts := PageTemplates()
	if len(ts) == 0 {
		t.Fatal("no page templates")
	}
	for _, tp := range ts {
		exp := strings.NewReplacer("{tenant}", "gh", "{patient}", tPatient, "{id}", tID, "{"+PageVariable+"}", "3").Replace(tp.URITemplate)
		p, err := ParsePageURI(exp)
		if err != nil || p.Page != 3 || p.String() != exp {
			t.Errorf("template %q expands to %q: %+v, %v", tp.URITemplate, exp, p, err)
		}
		if tp.MIMEType != p.MIMEType() || tp.Name == "" || tp.Description == "" {
			t.Errorf("template %q: mime %q (want %q) or missing name/description", tp.URITemplate, tp.MIMEType, p.MIMEType())
		}
	}
}

// ParseReadURI takes a resource URI as page 0 and a page URI as its page,
// and judges anything with a /pages/ segment as a page URI.
func TestParseReadURI(t *testing.T) {
	note := "note://gh/patients/" + tPatient + "/notes/" + tID
	for _, tc := range []struct {
		raw    string
		page   int
		reason string // "" = accepted
	}{
		{note, 0, ""},
		{"fhir://gh/patients/" + tPatient + "/observation/" + tID, 0, ""},
		{note + "/pages/3", 3, ""},
		{note + "/pages/0", 0, "page is not a decimal number from 1 to 99999 without leading zeros"},
		{"fhir://gh/patients/" + tPatient + "/observation/" + tID + "/pages/1", 0, "resource family has no pages"},
		{note + "/", 0, "uri has a trailing slash"},
	} {
		p, err := ParseReadURI(tc.raw)
		if tc.reason == "" {
			if err != nil || p.Page != tc.page || p.String() != tc.raw {
				t.Errorf("ParseReadURI(%q) = %+v, %v", tc.raw, p, err)
			}
			continue
		}
		var ue *URIError
		if !errors.As(err, &ue) || ue.Reason != tc.reason {
			t.Errorf("ParseReadURI(%q): got %v, want reason %q", tc.raw, err, tc.reason)
		}
	}
}

// FuzzParsePageURI checks that accepted page URIs are canonical, name a
// pageable resource and a page in range, and are never catalog keys.
func FuzzParsePageURI(f *testing.F) {
	f.Add("note://general-hospital/patients/" + tPatient + "/notes/" + tID + "/pages/7")
	f.Add("fhir://t/patients/" + tPatient + "/patient/" + tPatient + "/pages/1")
	f.Fuzz(func(t *testing.T, raw string) {
		p, err := ParsePageURI(raw)
		if err != nil {
			if !errors.Is(err, ErrBadURI) {
				t.Fatalf("error does not wrap ErrBadURI: %v", err)
			}
			return
		}
		if p.String() != raw || p.Page < 1 || p.Page > MaxPage || !p.Pageable() || len(raw) > MaxURILength {
			t.Fatalf("accepted %q as %+v", raw, p)
		}
		if _, err := ParseURI(raw); err == nil {
			t.Fatalf("ParseURI accepts page uri %q", raw)
		}
		if _, err := ParseURI(p.URI.String()); err != nil {
			t.Fatalf("resource of %q does not parse: %v", raw, err)
		}
	})
}
