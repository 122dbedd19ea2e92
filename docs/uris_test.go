// Package docs_test checks the examples in the documentation against the
// code, so that the docs cannot drift from what custos accepts.
package docs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/store"
)

// uriLike matches anything written as SCHEME://…, up to a character that
// ends a URI in Markdown, JSON or YAML text.
var uriLike = regexp.MustCompile("[A-Za-z][A-Za-z0-9+.-]*://[^\\s`\"'|,\\]]*")

// webSchemes are URLs of the web (identity providers, Vault, links), not
// resource URIs.
var webSchemes = map[string]bool{"http": true, "https": true}

// notResourceURIs are the only places where a non-web scheme other than
// custos's families may appear, and why.
var notResourceURIs = map[[2]string]string{
	{"docs/audit-format.md", "phi"}: "golden encoding vectors: the encoder treats uris as opaque strings, and the bytes are fixed by their hashes",
}

// rejectedSection is the heading of the section in docs/uris.md whose
// examples are inputs ParseURI must refuse.
const rejectedSection = "## What is rejected, and why"

// example is one URI-looking string in a document.
type example struct {
	file, text string
	line       int
	rejected   bool // shown as an input custos refuses
}

// TestDocumentedURIsParse extracts every URI-looking string from docs/,
// README.md and SECURITY.md and checks it against store.ParseURI (or
// store.ParsePageURI for a page): a complete example must parse, a template
// ({tenant}, <patient-id>) must parse once its variables are filled in, an
// example elided with "…" or "..." must be the start and end of a URI that
// parses, and an example shown as rejected must not parse. docs/policy.md
// once showed "custos://general-hospital/observation/...", which custos
// refuses (there is no custos:// scheme).
func TestDocumentedURIsParse(t *testing.T) {
	examples := documentedURIs(t)
	checked := 0
	for _, ex := range examples {
		scheme, _, _ := strings.Cut(ex.text, "://")
		if webSchemes[strings.ToLower(scheme)] { // RFC 3986: HTTP:// is http://
			continue
		}
		where := fmt.Sprintf("%s:%d: %q", ex.file, ex.line, ex.text)
		if why, ok := notResourceURIs[[2]string{ex.file, scheme}]; ok && !ex.rejected {
			t.Logf("%s: skipped (%s)", where, why)
			continue
		}
		checked++
		err := checkURIExample(ex.text)
		switch {
		case ex.rejected && elided(ex.text):
			// Only the parts around the elision are shown; which part is
			// wrong is said in words beside it.
		case ex.rejected && err == nil:
			t.Errorf("%s is shown as rejected, but custos accepts it", where)
		case !ex.rejected && err != nil:
			t.Errorf("%s: custos rejects this example: %v", where, err)
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d URI examples; the extraction is broken (docs/uris.md alone has more)", checked)
	}
}

// documentedURIs returns every URI-looking string of the documentation.
func documentedURIs(t *testing.T) []example {
	t.Helper()
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	yaml, _ := filepath.Glob("*.yaml")
	files = append(files, yaml...)
	files = append(files, "../README.md", "../SECURITY.md")
	var out []example
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.ToSlash(filepath.Join("docs", f))
		if strings.HasPrefix(f, "../") {
			name = strings.TrimPrefix(f, "../")
		}
		rejected := false
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "#!") {
				rejected = name == "docs/uris.md" && line == rejectedSection
			}
			for _, m := range uriLike.FindAllString(line, -1) {
				out = append(out, example{file: name, text: trimProse(m), line: i + 1, rejected: rejected})
			}
		}
	}
	return out
}

// trimProse drops the punctuation of the sentence around a URI: a final
// period, colon or semicolon, and closing parentheses the URI did not open.
func trimProse(s string) string {
	for len(s) > 0 {
		last := s[len(s)-1]
		switch {
		case last == '.' && !strings.HasSuffix(s, "..."), last == ':', last == ';':
		case last == ')' && strings.Count(s, ")") > strings.Count(s, "("):
		default:
			return s
		}
		s = s[:len(s)-1]
	}
	return s
}

// placeholder is a template variable ({tenant}, {alias(id)}) or a
// stand-in written in angle brackets (<patient-id>).
var placeholder = regexp.MustCompile(`\{[^{}]*\}|<[^<>]*>`)

// elision is how an example leaves parts out.
var elision = regexp.MustCompile(`…|\.\.\.`)

func elided(s string) bool { return elision.MatchString(s) }

// fill replaces every placeholder with a valid value for it.
func fill(s string) string {
	return placeholder.ReplaceAllStringFunc(s, func(p string) string {
		name := strings.ToLower(p[1 : len(p)-1])
		switch {
		case strings.Contains(name, "tenant"):
			return "general-hospital"
		case name == "type":
			return store.TypeObservation
		case name == "n" || name == "page":
			return "1"
		default: // patient and resource ids, and their aliases
			return "0b5c1f7e-3c2a-4d7e-9f10-2a3b4c5d6e7f"
		}
	})
}

// parse accepts a resource URI or a page URI.
func parse(s string) error {
	if _, err := store.ParseURI(s); err != nil {
		if _, perr := store.ParsePageURI(s); perr != nil {
			return err
		}
	}
	return nil
}

// checkURIExample reports why custos would refuse the URI an example shows.
func checkURIExample(text string) error {
	s := fill(text)
	if scheme, rest, _ := strings.Cut(s, "://"); rest == "" { // a scheme alone (the grammar)
		for _, tm := range append(store.Templates(), store.PageTemplates()...) {
			if strings.HasPrefix(tm.URITemplate, scheme+"://") {
				return nil
			}
		}
		return fmt.Errorf("%s is not the scheme of a resource family", scheme)
	}
	if !elided(s) {
		return parse(s)
	}
	// An elided example is the beginning and the end of a URI: whole
	// segments before the first elision and after the last one. It is fine
	// if some URI of some family has those segments there.
	parts := elision.Split(s, -1)
	head := strings.Split(parts[0], "/")
	head = head[:len(head)-1] // the segment the elision cuts into
	tail := strings.Split(parts[len(parts)-1], "/")[1:]
	for _, tm := range append(store.Templates(), store.PageTemplates()...) {
		segs := strings.Split(fill(tm.URITemplate), "/")
		if len(head)+len(tail) > len(segs) {
			continue
		}
		copy(segs, head)
		copy(segs[len(segs)-len(tail):], tail)
		if parse(strings.Join(segs, "/")) == nil {
			return nil
		}
	}
	return fmt.Errorf("no URI of any family (see docs/uris.md) begins and ends as shown")
}
