package server_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/store"
)

const testPageSize = 64

// readPages reads every page of uri and returns them with the page count
// the server announced. It stops at the first error.
func readPages(t *testing.T, cs *mcp.ClientSession, uri string) ([]string, int) {
	t.Helper()
	var pages []string
	total := 0
	for n := 1; ; n++ {
		res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: fmt.Sprintf("%s/pages/%d", uri, n)})
		if err != nil {
			t.Fatalf("page %d of %d: %v", n, total, err)
		}
		c := res.Contents[0]
		if c.URI != fmt.Sprintf("%s/pages/%d", uri, n) || c.MIMEType != store.MIMEMarkdown {
			t.Fatalf("page %d content uri %q mime %q", n, c.URI, c.MIMEType)
		}
		if got, _ := c.Meta[server.PageKey].(float64); int(got) != n {
			t.Fatalf("page %d says it is page %v", n, c.Meta[server.PageKey])
		}
		pc, _ := c.Meta[server.PagesKey].(float64)
		if total == 0 {
			total = int(pc)
		} else if int(pc) != total {
			t.Fatalf("page count changed from %d to %v", total, pc)
		}
		if len(c.Text) > testPageSize || !utf8.ValidString(c.Text) {
			t.Fatalf("page %d: %d bytes, valid UTF-8 %v", n, len(c.Text), utf8.ValidString(c.Text))
		}
		pages = append(pages, c.Text)
		if n >= total {
			return pages, total
		}
	}
}

// scrubbedNotesPolicy writes a policy that releases notes only, under the
// scrub obligation (the default policy releases notes whole or not at
// all), and returns its directory.
func scrubbedNotesPolicy(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	pol := `package custos.authz

decision := {"allow": true, "reasons": ["test_notes_scrubbed"], "obligations": [{"op": "scrub", "path": ""}]} if {
	input.resource.type == "note"
} else := {"allow": false, "reasons": ["test_notes_only"], "obligations": []}
`
	if err := os.WriteFile(filepath.Join(dir, "scrub.rego"), []byte(pol), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Pages are cut from the text the server would release whole: concatenated
// they are that text exactly (so, under obligations, the minimized text and
// never more), each read is decided and audited on its own, and a page past
// the end answers like a missing resource.
func TestRangedReadsArePagesOfTheReleasedText(t *testing.T) {
	// The default policy releases notes whole or not at all; a test policy
	// releases notes only, scrubbed.
	scrubDir := scrubbedNotesPolicy(t)
	minimizedSeen := 0
	for _, tc := range []struct{ name, policyDir string }{{"clinician", ""}, {"clinician", scrubDir}} {
		t.Run(fmt.Sprintf("%s/scrubbed=%v", tc.name, tc.policyDir != ""), func(t *testing.T) {
			f := newFixture(t, "")
			f.reconfigurePolicy(tc.policyDir, func(c *server.Config) { c.Resources.TextPageSize = testPageSize })
			persona := tc.name
			cs := f.connect(f.identity(persona))
			var notes []*mcp.Resource
			for r, err := range cs.Resources(context.Background(), nil) {
				if err != nil {
					t.Fatal(err)
				}
				if strings.HasPrefix(r.URI, "note://") {
					notes = append(notes, r)
				}
			}
			if len(notes) == 0 {
				t.Fatalf("%s can read no note: the test would prove little", persona)
			}
			for _, note := range notes[:min(3, len(notes))] {
				whole, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: note.URI})
				if err != nil {
					t.Fatal(err)
				}
				before := len(f.records())
				pages, total := readPages(t, cs, note.URI)
				if total < 2 {
					t.Fatalf("%s: %d page(s) of %d bytes: the test would prove little", note.URI, total, len(whole.Contents[0].Text))
				}
				if got := strings.Join(pages, ""); got != whole.Contents[0].Text {
					t.Fatalf("%s: pages do not concatenate to the released text", note.URI)
				}
				if whole.Contents[0].Meta[server.ETagKey] == nil {
					t.Fatalf("%s: no etag", note.URI)
				}
				minimized := note.Size == 0
				if minimized {
					// The released text is not the stored one; the pages are
					// the released text, so none of them is stored text that
					// minimization changed.
					r, err := f.catalog.Get(note.URI)
					if err != nil {
						t.Fatal(err)
					}
					raw, err := f.catalog.Blob(context.Background(), r.Digest)
					if err != nil {
						t.Fatal(err)
					}
					if string(raw) == whole.Contents[0].Text {
						continue // nothing to scrub in this note
					}
					minimizedSeen++
				}
				// One record per page, naming the page.
				recs := f.records()[before:]
				if len(recs) != total {
					t.Fatalf("%d records for %d page reads", len(recs), total)
				}
				for i, r := range recs {
					if r.Action != server.ActionRead || r.Outcome != audit.OutcomeAllow || !strings.HasSuffix(r.Reason, fmt.Sprintf(",page=%d", i+1)) ||
						len(r.URIs) != 1 || r.URIs[0] != f.audited(note.URI) || len(r.Digests) != 1 || (minimized != (len(r.Obligations) > 0)) {
						t.Fatalf("page %d audited as %s/%s %q %v %v obligations %v", i+1, r.Action, r.Outcome, r.Reason, r.URIs, r.Digests, r.Obligations)
					}
				}

				// Past the end: the same error as a missing note; on record
				// as an allow (decided before the page count is known) and
				// the failure.
				past := fmt.Sprintf("%s/pages/%d", note.URI, total+1)
				u, _ := store.ParseURI(note.URI)
				u.ID = "00000000-0000-4000-8000-000000000000"
				missing := u.String() + "/pages/1"
				before = len(f.records())
				_, errPast := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: past})
				_, errMissing := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: missing})
				var a, b *jsonrpc.Error
				if !errors.As(errPast, &a) || !errors.As(errMissing, &b) || a.Code != server.NotFoundCode(cs.InitializeResult().ProtocolVersion) || a.Code != b.Code || a.Message != b.Message {
					t.Fatalf("past the end %v vs missing %v: want the same not-found answer", errPast, errMissing)
				}
				recs = f.records()[before:]
				if len(recs) != 3 || recs[0].Outcome != audit.OutcomeAllow || recs[1].Outcome != audit.OutcomeError ||
					recs[1].Reason != fmt.Sprintf("page_out_of_range,page=%d", total+1) || recs[2].Reason != "not_found,page=1" {
					for _, r := range recs {
						t.Logf("%s/%s %q", r.Action, r.Outcome, r.Reason)
					}
					t.Fatalf("past-the-end and missing page audited wrongly")
				}
			}
		})
	}
	if minimizedSeen == 0 {
		t.Fatal("no minimized note was paged: the test would prove little")
	}
}

// A page is decided as the resource: a caller who may not read the note
// gets the not-found answer for every page, and each refusal is audited.
func TestRangedReadOfADeniedNote(t *testing.T) {
	f := newFixture(t, "")
	var note string
	for _, r := range f.allURIs() {
		if r.Labels.Type == store.TypeNote {
			note = r.URI
			break
		}
	}
	cs := f.connect(f.identity("outsider"))
	before := len(f.records())
	for _, n := range []int{1, 2} {
		_, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: fmt.Sprintf("%s/pages/%d", note, n)})
		if rpcCode(err) != server.NotFoundCode(cs.InitializeResult().ProtocolVersion) {
			t.Fatalf("denied page %d: %v", n, err)
		}
	}
	for i, r := range f.records()[before:] {
		if r.Outcome != audit.OutcomeDeny || !strings.HasSuffix(r.Reason, fmt.Sprintf(",page=%d", i+1)) || r.Reason == fmt.Sprintf("not_found,page=%d", i+1) {
			t.Errorf("denied page audited as %s %q", r.Outcome, r.Reason)
		}
	}
}

func TestBadPageURIsAreInvalidParams(t *testing.T) {
	f := newFixture(t, "")
	cs := f.connect(f.identity("clinician"))
	var note, fhir string
	for _, r := range f.allURIs() {
		switch {
		case note == "" && r.Labels.Type == store.TypeNote:
			note = r.URI
		case fhir == "" && strings.HasPrefix(r.URI, "fhir://"):
			fhir = r.URI
		}
	}
	before := len(f.records())
	bad := []string{note + "/pages/0", note + "/pages/01", note + "/pages/x", note + "/pages/", fhir + "/pages/1", note + "/pages/1?token=abc"}
	for _, uri := range bad {
		_, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
		if rpcCode(err) != jsonrpc.CodeInvalidParams || strings.Contains(err.Error(), "abc") {
			t.Errorf("%s: want -32602 without echo, got %v", uri, err)
		}
	}
	recs := f.records()[before:]
	if len(recs) != len(bad) {
		t.Fatalf("%d records for %d bad page uris", len(recs), len(bad))
	}
	for _, r := range recs {
		if r.Outcome != audit.OutcomeDeny || r.Reason != "bad_uri" {
			t.Errorf("bad page uri audited as %s/%s", r.Outcome, r.Reason)
		}
	}
}

// The page template is served with the family templates.
func TestPageTemplateIsListed(t *testing.T) {
	f := newFixture(t, "")
	cs := f.connect(f.identity("clinician"))
	res, err := cs.ListResourceTemplates(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range res.ResourceTemplates {
		if tp.URITemplate == pageTemplate && tp.MIMEType == store.MIMEMarkdown {
			return
		}
	}
	t.Fatalf("page template not listed: %+v", res.ResourceTemplates)
}
