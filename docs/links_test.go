package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mdLink matches a Markdown inline link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// heading matches a Markdown ATX heading.
var heading = regexp.MustCompile(`(?m)^#+[ \t]+(.+)$`)

// anchorOf is the fragment GitHub gives a heading: lower case, punctuation
// other than '-' and '_' dropped, spaces as '-'.
func anchorOf(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestRelativeLinksResolve: every relative link in docs/*.md, README.md and
// SECURITY.md names a file or directory of the repository, and a link to
// a heading (#anchor), in the same document or another, names one that
// exists: a reader who follows it lands where the text says.
func TestRelativeLinksResolve(t *testing.T) {
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../README.md", "../SECURITY.md")
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		a := map[string]bool{}
		for _, m := range heading.FindAllStringSubmatch(string(b), -1) {
			a[anchorOf(m[1])] = true
		}
		anchors[path] = a
		return a
	}
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				path, frag, _ := strings.Cut(target, "#")
				dest := f
				if path != "" {
					dest = filepath.Join(filepath.Dir(f), path)
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s:%d: link %s: %v", f, i+1, target, err)
						continue
					}
				}
				if frag != "" && strings.HasSuffix(dest, ".md") && !anchorsOf(dest)[frag] {
					t.Errorf("%s:%d: link %s: %s has no heading #%s", f, i+1, target, dest, frag)
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d relative links, want at least 20: is the scan broken?", checked)
	}
}
