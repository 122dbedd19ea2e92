package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/store"
)

// TestImportEHRNotesAndRead: 'custos import' of each variant of
// h-outside5's Epic clinical-note searchset (fhirin/testdata/ehrnotes: an
// RTF with windows-1252 bytes, an RTF after a byte order mark or a line
// break, HTML in ISO-8859-1 or windows-1252 declared only in a meta
// element, HTML without a tag) into its own data directory on real bbolt
// files, then custos served as `custos serve --dev` assembles it
// (app.Open): the care team's clinician lists the note's Binary and reads
// it, and gets the text an RTF or HTML reader renders. Each import failed
// whole before (for instance "Binary.contentType: bad attachment: the
// bytes are text/plain, not text/rtf").
func TestImportEHRNotesAndRead(t *testing.T) {
	for _, tc := range []struct {
		file, mimeType string
		blob           bool   // served as a blob (base64), not text
		want           string // in the served note
	}{
		{"epic-rtf-cp1252.json", "application/rtf", true, "M\xfcller-Penhallow \x96 plan"},
		{"epic-rtf-bom.json", "text/rtf", false, "\ufeff{\\rtf1"},
		{"epic-rtf-linebreak.json", "text/rtf", false, "\r\n{\\rtf1"},
		{"epic-html-meta-charset.json", "text/html; charset=utf-8", false, "Müller-Penhallow"},
		{"epic-html-http-equiv.json", "text/html; charset=utf-8", false, "“Feeling better” – Dr. Orla Müller"},
		{"epic-html-tagless.json", "text/html", false, "Discharge summary: "},
	} {
		t.Run(strings.TrimSuffix(tc.file, ".json"), func(t *testing.T) {
			dir := t.TempDir()
			input, err := filepath.Abs(filepath.Join("..", "..", "fhirin", "testdata", "ehrnotes", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			mustImportFHIR(t, dir, input)
			_, rs := openCatalog(t, dir)
			var note store.Resource
			for _, r := range rs {
				if r.Labels.Type == store.TypeAttachment { // the Binary
					note = r
				}
			}
			if note.URI == "" || note.MIMEType != tc.mimeType {
				t.Fatalf("the note's Binary is stored as %q (%q), want %q", note.MIMEType, note.URI, tc.mimeType)
			}
			got := readAsClinician(t, dir, note.URI)
			if got.MIMEType != tc.mimeType || (got.Blob != nil) != tc.blob || !strings.Contains(string(got.Blob)+got.Text, tc.want) {
				t.Errorf("the clinician read %q (blob %v): %q%q, want %q holding %q", got.MIMEType, got.Blob != nil, got.Text, got.Blob, tc.mimeType, tc.want)
			}
			if tc.blob {
				// An RTF with 8-bit bytes is stored and served as the
				// source's bytes: its digest is theirs.
				src := binaryData(t, input)
				if sum := sha256.Sum256(src); note.Digest != "sha256:"+hex.EncodeToString(sum[:]) || !bytes.Equal(got.Blob, src) {
					t.Errorf("stored %s and served %q, want the source's bytes %q", note.Digest, got.Blob, src)
				}
			}
		})
	}
}

// binaryData is the decoded data of the Binary of the Bundle in file.
func binaryData(t *testing.T, file string) []byte {
	t.Helper()
	var b struct {
		Entry []struct {
			Resource struct{ ResourceType, Data string }
		}
	}
	if err := json.Unmarshal(mustReadFile(t, file), &b); err != nil {
		t.Fatal(err)
	}
	for _, e := range b.Entry {
		if e.Resource.ResourceType == "Binary" {
			data, err := base64.StdEncoding.DecodeString(e.Resource.Data)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
	}
	t.Fatalf("%s holds no Binary", file)
	return nil
}

// readAsClinician serves the data directory dir as `custos serve --dev`
// does (app.Open, MCP over loopback HTTP), lists as a clinician with a
// care relationship with the Epic patient of fhirin/testdata/ehrnotes,
// reads uri, and returns its contents.
func readAsClinician(t *testing.T, dir, uri string) *mcp.ResourceContents {
	t.Helper()
	principal := `{"sub":"dr-p","roles":["clinician"],"client_id":"c","tenant":"t","patients":["eXq3MzR7bK9vLpT2wYnHfGA3"],"purpose_of_use":"TREAT"}`
	data, _ := json.Marshal(server.TokenFile{Tokens: []server.TokenEntry{{TokenSHA256: server.HashToken("clinician-token"), Principal: json.RawMessage(principal)}}})
	tokens, err := server.ParseTokenFile(data)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("VAULT_ADDR", "")
	a, err := app.Open(context.Background(), app.Options{DataDir: dir, Dev: true, Node: "test", Version: "test",
		HTTP: &app.HTTPOptions{Listen: "127.0.0.1:0", Tokens: tokens}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- a.Serve(ctx) }()
	defer func() {
		cancel()
		<-served
		if err := a.Close(); err != nil {
			t.Error(err)
		}
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "notes-test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: a.URL(), HTTPClient: &http.Client{Transport: bearerToken("clinician-token")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	page, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, r := range page.Resources {
		listed = listed || r.URI == uri
	}
	if !listed {
		t.Fatalf("the clinician does not list %s (%d listed)", uri, len(page.Resources))
	}
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("the clinician's read: %v", err)
	}
	if len(res.Contents) != 1 {
		t.Fatalf("read %d contents, want 1", len(res.Contents))
	}
	return res.Contents[0]
}

// bearerToken adds an Authorization header with its token.
type bearerToken string

func (b bearerToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}
