package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/store"
)

// A telephone number hidden in strings of a machine token's shape: a UUID
// and a hex run of 32.
const (
	phoneInUUID   = "aaaaaaaa-2024-0305-1234-5551234567ab"
	phoneInHexRun = "5551234567abcdef5551234567abcdef"
	hiddenPhone   = "5551234567"
)

// A title, description and name holding a telephone number in a UUID or a
// 32-hex run are listed without it, and so is a note read under the scrub
// obligation. After h-audit13 the scrub kept such "machine tokens" whole
// there too, where only custos's own audit reasons need them whole.
func TestScrubKeepsNoPhoneInAMachineTokenOfAResource(t *testing.T) {
	// A note of a patient the clinician treats, with no sensitivity or
	// consent label: the new note, with the same labels, is listed too.
	base := newFixture(t, "")
	var labels store.Labels
	var tmpl string
	for _, uri := range listAll(t, base.connect(base.identity("clinician"))) {
		if !strings.HasPrefix(uri, "note://") {
			continue
		}
		r, err := base.catalog.Get(uri)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Labels.Sensitivity) == 0 && len(r.Labels.Consent) == 0 {
			labels, tmpl = r.Labels, uri
			break
		}
	}
	if tmpl == "" {
		t.Fatal("the clinician lists no plain note: the test would prove little")
	}
	uri := tmpl[:strings.LastIndex(tmpl, "/")+1] + "0c1d2e3f-4a5b-4c6d-8e7f-8091a2b3c4d5"
	text := "Call back on " + phoneInUUID + " or " + phoneInHexRun + ".\n"
	f := newServerFixture(t, fixtureOptions{imports: func(t testing.TB, catPath string) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "note.md"), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		line, err := json.Marshal(store.ManifestEntry{
			URI: uri, Name: "note-" + phoneInHexRun, Title: "Callback " + phoneInUUID,
			Description: "Call " + phoneInHexRun + " or " + phoneInUUID, MIMEType: store.MIMEMarkdown,
			Labels: labels, File: "note.md",
		})
		if err != nil {
			t.Fatal(err)
		}
		importManifest(t, catPath, dir, append(line, '\n'))
	}})

	scrubDir := scrubbedNotesPolicy(t)
	for _, pc := range []struct{ name, dir string }{{"default", ""}, {"scrub", scrubDir}} {
		f.reconfigurePolicy(pc.dir, nil)
		cs := f.connect(f.identity("clinician"))
		listed := false
		for r, err := range cs.Resources(context.Background(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			if r.URI != uri {
				continue
			}
			listed = true
			for field, v := range map[string]string{"name": r.Name, "title": r.Title, "description": r.Description} {
				if strings.Contains(v, hiddenPhone) || !strings.Contains(v, "[PHONE]") {
					t.Errorf("policy %s: listed %s %q keeps the telephone number", pc.name, field, v)
				}
			}
		}
		if !listed {
			t.Fatalf("policy %s: the note is not listed", pc.name)
		}
	}
	// Still under the scrub policy: the read.
	cs := f.connect(f.identity("clinician"))
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Contents[0].Text; strings.Contains(got, hiddenPhone) || strings.Count(got, "[PHONE]") != 3 {
		t.Errorf("scrubbed note %q keeps a telephone number", got)
	}
}
