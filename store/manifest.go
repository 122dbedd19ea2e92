package store

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"
)

// Limits on manifest fields.
const (
	// MaxManifestLine is the longest manifest line accepted, in bytes.
	MaxManifestLine = 1 << 20
	// MaxBlobSize is the largest file a manifest entry may refer to.
	MaxBlobSize = 64 << 20

	maxNameLen        = 256
	maxTitleLen       = 1024
	maxDescriptionLen = 8192
	maxFileLen        = 1024
)

// Known label and annotation values.
var (
	// knownSensitivity: "hiv", "sud" (42 CFR Part 2), "psy", "eth", "sdv",
	// "std", "sex" (HL7 v3 ActCode sensitivity), "restricted" and
	// "very-restricted" (v3 Confidentiality R and V), "vip", "residence" (a
	// Location that is a patient's home: never reference data; fhirin
	// ResidenceLabel).
	knownSensitivity = []string{"eth", "hiv", "psy", "residence", "restricted", "sdv", "sex", "std", "sud", "very-restricted", "vip"}
	knownConsent     = []string{"opt-out"}
	knownAudience    = []string{"assistant", "user"}
)

// ManifestEntry is one line of an import manifest (JSON lines). File is the
// content's path relative to the manifest's directory.
type ManifestEntry struct {
	URI         string      `json:"uri"`
	Name        string      `json:"name"`
	Title       string      `json:"title,omitempty"`
	Description string      `json:"description,omitempty"`
	MIMEType    string      `json:"mimeType"`
	Annotations Annotations `json:"annotations"`
	Labels      Labels      `json:"labels"`
	File        string      `json:"file"`
}

// manifestLine is a validated entry with its line number and parsed URI.
type manifestLine struct {
	line  int
	entry ManifestEntry
	uri   URI
}

// ParseManifest reads a manifest (one JSON object per line; blank lines are
// ignored) and validates every entry without touching the files it names:
// JSON syntax, unknown fields, the URI, labels consistent with the URI,
// required fields, MIME type, annotation and label values, the file path and
// duplicate URIs. It returns the entries in manifest order with list and
// label fields normalized (sorted, empty lists as nil, times in UTC), or an
// error wrapping ErrBadManifest that lists every problem found (up to a cap),
// each as a *ManifestError naming its line.
func ParseManifest(r io.Reader) ([]ManifestEntry, error) {
	lines, err := parseManifest(r, "")
	if err != nil {
		return nil, err
	}
	out := make([]ManifestEntry, len(lines))
	for i := range lines {
		out[i] = lines[i].entry
	}
	return out, nil
}

// problems collects manifest problems up to maxReportedProblems.
type problems struct {
	file string
	list []*ManifestError
	more int
}

func (p *problems) add(line int, field, reason string) {
	if len(p.list) >= maxReportedProblems {
		p.more++
		return
	}
	p.list = append(p.list, &ManifestError{File: p.file, Line: line, Field: field, Reason: reason})
}

func (p *problems) err() error { return joinProblems(p.list, p.more) }

func parseManifest(r io.Reader, file string) ([]manifestLine, error) {
	probs := &problems{file: file}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxManifestLine)
	var out []manifestLine
	seen := make(map[string]int)
	n := 0
	for sc.Scan() {
		n++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		e, u, ok := parseLine(raw, n, probs)
		if !ok {
			continue
		}
		if first, dup := seen[e.URI]; dup {
			probs.add(n, "uri", fmt.Sprintf("duplicate uri (first on line %d)", first))
			continue
		}
		seen[e.URI] = n
		out = append(out, manifestLine{line: n, entry: e, uri: u})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			probs.add(n+1, "", fmt.Sprintf("line longer than %d bytes", MaxManifestLine))
		} else {
			// An I/O error reading the manifest is not a manifest problem.
			if perr := probs.err(); perr != nil {
				return nil, errors.Join(fmt.Errorf("store: read manifest: %w", err), perr)
			}
			return nil, fmt.Errorf("store: read manifest: %w", err)
		}
	}
	if err := probs.err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		probs.add(0, "", "manifest has no entries")
		return nil, probs.err()
	}
	return out, nil
}

// parseLine decodes and statically validates one non-blank line, recording
// every problem it finds. The decoded value is only returned when the whole
// line is valid.
func parseLine(raw []byte, n int, probs *problems) (ManifestEntry, URI, bool) {
	var e ManifestEntry
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		probs.add(n, "json", describeJSONError(err))
		return ManifestEntry{}, URI{}, false
	}
	if len(bytes.TrimSpace(raw[dec.InputOffset():])) != 0 {
		probs.add(n, "json", "trailing data after the object")
		return ManifestEntry{}, URI{}, false
	}
	before := len(probs.list) + probs.more
	bad := func(field, reason string) { probs.add(n, field, reason) }

	var u URI
	if e.URI == "" {
		bad("uri", "missing")
	} else if pu, err := ParseURI(e.URI); err != nil {
		var ue *URIError
		if errors.As(err, &ue) {
			bad("uri", ue.Reason)
		} else {
			bad("uri", "invalid")
		}
	} else {
		u = pu
		if e.Labels.Tenant != u.Tenant {
			bad("labels.tenant", "does not match the uri")
		}
		if e.Labels.Patient != u.Patient {
			bad("labels.patient", "does not match the uri")
		}
		if e.Labels.Type != u.Type {
			bad("labels.type", "does not match the uri")
		}
		switch want := u.MIMEType(); {
		case want == "" && e.MIMEType != "":
			// Attachments: a media type of their own, in canonical form.
			if mt, params, err := mime.ParseMediaType(e.MIMEType); err != nil || mime.FormatMediaType(mt, params) != e.MIMEType {
				bad("mimeType", "is not a media type in canonical form (lowercase, no spaces)")
			}
		case e.MIMEType != "" && e.MIMEType != want:
			bad("mimeType", "must be "+want+" for "+u.Scheme+" resources")
		}
	}
	checkText := func(field, v string, max int, required bool) {
		switch {
		case v == "" && required:
			bad(field, "missing")
		case len(v) > max:
			bad(field, fmt.Sprintf("longer than %d bytes", max))
		case !utf8.ValidString(v):
			bad(field, "not valid utf-8")
		case hasControl(v):
			bad(field, "contains control characters")
		}
	}
	checkText("name", e.Name, maxNameLen, true)
	checkText("title", e.Title, maxTitleLen, false)
	checkText("description", strings.ReplaceAll(e.Description, "\n", " "), maxDescriptionLen, false)
	if e.MIMEType == "" {
		bad("mimeType", "missing")
	}

	var err error
	if e.Annotations.Audience, err = normalizeSet(e.Annotations.Audience, knownAudience); err != nil {
		bad("annotations.audience", err.Error())
	}
	if p := e.Annotations.Priority; !(p >= 0 && p <= 1) {
		bad("annotations.priority", "must be between 0 and 1")
	}
	e.Annotations.LastModified = e.Annotations.LastModified.UTC()
	if e.Labels.Sensitivity, err = normalizeSet(e.Labels.Sensitivity, knownSensitivity); err != nil {
		bad("labels.sensitivity", err.Error())
	}
	if e.Labels.Consent, err = normalizeSet(e.Labels.Consent, knownConsent); err != nil {
		bad("labels.consent", err.Error())
	}

	switch {
	case e.File == "":
		bad("file", "missing")
	case len(e.File) > maxFileLen:
		bad("file", "path too long")
	case strings.ContainsRune(e.File, 0) || hasControl(e.File):
		bad("file", "path contains control characters")
	case filepath.IsAbs(e.File) || strings.HasPrefix(e.File, "/"):
		bad("file", "path is absolute")
	case !filepath.IsLocal(e.File):
		bad("file", "path escapes the manifest directory")
	case filepath.Clean(e.File) != e.File:
		bad("file", "path is not clean")
	}

	if len(probs.list)+probs.more != before {
		return ManifestEntry{}, URI{}, false
	}
	return e, u, true
}

// describeJSONError turns a decoding error into a reason that names what is
// wrong without quoting values from the line.
func describeJSONError(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid json syntax at byte %d", se.Offset)
	case errors.As(err, &te):
		if te.Field != "" {
			return "field " + te.Field + " has the wrong type (want " + te.Type.String() + ")"
		}
		return "line is not a json object"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "truncated json"
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		if len(f) > 66 {
			f = f[:66] + "…"
		}
		return "unknown field " + f
	}
	// time.Time and other decoders: say which kind of problem, not the value.
	if strings.Contains(msg, "parsing time") {
		return "annotations.lastModified is not an RFC 3339 time"
	}
	return "invalid json value"
}

// normalizeSet checks that every value is known and appears once, and returns
// the values sorted (nil when empty) so that reordering a list in the
// manifest does not create a new version.
func normalizeSet(vals, known []string) ([]string, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	out := slices.Clone(vals)
	slices.Sort(out)
	for i, v := range out {
		if !slices.Contains(known, v) {
			return nil, fmt.Errorf("unknown value (want one of %s)", strings.Join(known, ", "))
		}
		if i > 0 && out[i-1] == v {
			return nil, errors.New("duplicate value")
		}
	}
	return out, nil
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return true
		}
	}
	return false
}
