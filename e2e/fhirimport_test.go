package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/server"
)

// TestFHIRBulkImportServed drives issue 14's import as an operator would:
// `custos seed` writes a FHIR Bulk export, `custos import --tenant` loads
// it, and a clinician's MCP client lists and reads it through `custos
// serve`. No source id reaches a URI, name, title or description; a lifted
// note attachment is read back byte for byte through the link its
// DocumentReference carries; re-importing changes nothing; a Bulk
// "deleted" entry imported while the server runs retires the resource: it
// leaves the list, and the server records the retirement.
func TestFHIRBulkImportServed(t *testing.T) {
	dir := t.TempDir()
	seed, data := filepath.Join(dir, "synthetic"), filepath.Join(dir, "data")
	audittest.VerifyOnCleanup(t, filepath.Join(data, "audit.db"))
	mustCustos(t, "seed", "--out", seed, "--patients", "6", "--seed", "11")
	bulk := filepath.Join(seed, "bulk")
	srcIDs, notes, observation := readBulk(t, bulk)

	rep := importJSON(t, data, bulk)
	if rep.Created == 0 || rep.Updated != 0 || rep.Unchanged != 0 {
		t.Fatalf("first import: %+v", rep)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.Command(bin, "serve", "--dev", "--data-dir", data, "--stdio", "--page-size", "50")
	cmd.Env = append(os.Environ(), "CUSTOS_PRINCIPAL_FILE="+filepath.Join(seed, "principals", "clinician.json"))
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-fhir-import", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cs.Close(); cmd.Wait() }()

	listed := listAll(t, ctx, cs)
	if len(listed) == 0 {
		t.Fatal("the clinician lists nothing of the imported export")
	}
	var docRefs []string
	schemes := map[string]bool{}
	for _, r := range listed {
		for _, id := range srcIDs {
			for _, field := range []string{r.URI, r.Name, r.Title, r.Description} {
				if strings.Contains(field, id) {
					t.Fatalf("a source id appears in a listed resource (%s): %q", r.URI, field)
				}
			}
		}
		schemes[r.URI[:strings.Index(r.URI, "://")]] = true
		if strings.Contains(r.URI, "/documentreference/") {
			docRefs = append(docRefs, r.URI)
		}
	}
	if !schemes["fhir"] || !schemes["attachment"] {
		t.Fatalf("schemes listed: %v, want fhir and attachment", schemes)
	}
	if len(docRefs) == 0 {
		t.Fatal("no DocumentReference listed")
	}

	// A note: the DocumentReference links its attachment by custos URI,
	// and that URI serves the bytes the export carried inline.
	matched := 0
	for _, uri := range docRefs {
		body := readText(t, ctx, cs, uri)
		var doc struct {
			Content []struct {
				Attachment struct {
					URL  string `json:"url"`
					Data string `json:"data"`
				} `json:"attachment"`
			} `json:"content"`
		}
		if err := json.Unmarshal([]byte(body), &doc); err != nil || len(doc.Content) == 0 {
			t.Fatalf("DocumentReference %s: %v", uri, err)
		}
		att := doc.Content[0].Attachment
		if att.Data != "" || !strings.HasPrefix(att.URL, "attachment://general-hospital/patients/") {
			t.Fatalf("DocumentReference %s carries data or no custos link: url %q", uri, att.URL)
		}
		got := readText(t, ctx, cs, att.URL)
		if slices.Contains(notes, got) {
			matched++
		}
	}
	t.Logf("clinician lists %d of %d imported entries; %d notes read through their links", len(listed), rep.Created, matched)
	if matched != len(docRefs) {
		t.Fatalf("%d of %d linked attachments served the exported note bytes", matched, len(docRefs))
	}

	// Re-importing the same export changes nothing.
	if rep2 := importJSON(t, data, bulk); rep2.Created != 0 || rep2.Updated != 0 || rep2.Unchanged != rep.Created {
		t.Fatalf("re-import: %+v, first %+v", rep2, rep)
	}

	// A Bulk "deleted" entry retires one Observation while serving.
	before := len(listed)
	del := filepath.Join(dir, "deletion")
	if err := os.MkdirAll(del, 0o755); err != nil {
		t.Fatal(err)
	}
	bundle := `{"resourceType":"Bundle","type":"transaction","entry":[{"request":{"method":"DELETE","url":"Observation/` + observation + `"}}]}` + "\n"
	manifest := `{"transactionTime":"2026-11-25T00:00:00Z","request":"https://ehr.example/fhir/$export","requiresAccessToken":true,"output":[],"deleted":[{"type":"Bundle","url":"deleted.ndjson"}],"error":[]}`
	writeFile(t, filepath.Join(del, "deleted.ndjson"), bundle)
	writeFile(t, filepath.Join(del, "export.json"), manifest)
	if rep3 := importJSON(t, data, filepath.Join(del, "export.json")); rep3.Retired != 1 {
		t.Fatalf("deletion import: %+v", rep3)
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(listAll(t, ctx, cs)) != before-1 {
		if time.Now().After(deadline) {
			t.Fatalf("the retired Observation is still listed: %d listed, want %d", len(listAll(t, ctx, cs)), before-1)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The one URI gone is an Observation, and it no longer reads either.
	now := map[string]bool{}
	for _, r := range listAll(t, ctx, cs) {
		now[r.URI] = true
	}
	var gone []string
	for _, r := range listed {
		if !now[r.URI] {
			gone = append(gone, r.URI)
		}
	}
	if len(gone) != 1 || !strings.Contains(gone[0], "/observation/") {
		t.Fatalf("URIs gone from the list: %v, want the one retired Observation", gone)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: gone[0]}); err == nil {
		t.Fatal("the retired Observation still reads")
	}
	cs.Close()
	cmd.Wait()
	d := &dataset{data: data}
	retired := 0
	for _, r := range d.records(t) {
		if r.Action == server.ActionRetire && r.Reason == server.ReasonRetired {
			retired++
			if len(r.URIs) != 1 || !strings.Contains(r.URIs[0], "/observation/") {
				t.Errorf("retire record names %v", r.URIs)
			}
		}
	}
	if retired != 1 {
		t.Fatalf("%d retire records, want 1", retired)
	}
}

type importReport struct {
	Created, Updated, Unchanged, Retired int
}

func importJSON(t *testing.T, data, path string) importReport {
	t.Helper()
	out, errOut, code := custos(t, nil, "import", "--data-dir", data, "--tenant", "general-hospital", "--json", path)
	if code != 0 {
		t.Fatalf("import %s: exit %d\n%s%s", path, code, out, errOut)
	}
	var rep importReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("import report: %v\n%s", err, out)
	}
	return rep
}

// readBulk returns every source id of the export (the ids of its
// resources, which include every Patient its references name), the decoded
// note texts of its DocumentReferences, and one Observation id.
func readBulk(t *testing.T, dir string) (ids, notes []string, observation string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.ndjson"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no NDJSON in %s: %v", dir, err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var r struct {
				ResourceType string          `json:"resourceType"`
				ID           string          `json:"id"`
				Content      json.RawMessage `json:"content"` // a list in DocumentReference, one Attachment in Media
			}
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			seen[r.ID] = true
			if r.ResourceType == "Observation" && observation == "" {
				observation = r.ID
			}
			if r.ResourceType == "DocumentReference" {
				var content []struct {
					Attachment struct {
						Data string `json:"data"`
					} `json:"attachment"`
				}
				if err := json.Unmarshal(r.Content, &content); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				for _, c := range content {
					b, err := base64.StdEncoding.DecodeString(c.Attachment.Data)
					if err != nil {
						t.Fatal(err)
					}
					notes = append(notes, string(b))
				}
			}
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	for id := range seen {
		if len(id) >= 8 { // every synthetic id is a UUID
			ids = append(ids, id)
		}
	}
	if observation == "" || len(notes) == 0 {
		t.Fatalf("the export has no Observation or no note")
	}
	return ids, notes, observation
}

func listAll(t *testing.T, ctx context.Context, cs *mcp.ClientSession) []*mcp.Resource {
	t.Helper()
	var out []*mcp.Resource
	for r, err := range cs.Resources(ctx, nil) {
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		out = append(out, r)
	}
	return out
}

func readText(t *testing.T, ctx context.Context, cs *mcp.ClientSession, uri string) string {
	t.Helper()
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil || len(res.Contents) != 1 {
		t.Fatalf("read %s: %v", uri, err)
	}
	if c := res.Contents[0]; c.Text != "" {
		return c.Text
	} else {
		return string(c.Blob)
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFHIRImportBadInputChangesNothing: a truncated NDJSON line and an
// attachment whose bytes contradict its contentType are refused by `custos
// import` with the file and line named, no content quoted, and the catalog
// left byte for byte as it was.
func TestFHIRImportBadInputChangesNothing(t *testing.T) {
	dir := t.TempDir()
	seed, data := filepath.Join(dir, "synthetic"), filepath.Join(dir, "data")
	mustCustos(t, "seed", "--out", seed, "--patients", "3", "--seed", "5")
	importJSON(t, data, filepath.Join(seed, "bulk"))
	catalog := filepath.Join(data, "catalog.db")
	before, err := os.ReadFile(catalog)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, file, content, want string }{
		{"truncated line", "Observation.ndjson", `{"resourceType":"Observation","id":"obs-x","status":"final","code":{"text":"SECRET-PHI`, "Observation.ndjson:1"},
		{"attachment contradicting its type", "DocumentReference.ndjson",
			`{"resourceType":"DocumentReference","id":"doc-x","status":"current","subject":{"reference":"Patient/p-1"},"content":[{"attachment":{"contentType":"application/pdf","data":"` +
				base64.StdEncoding.EncodeToString([]byte("SECRET-PHI plain text, not a PDF")) + `"}}]}`, "DocumentReference.ndjson:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := filepath.Join(t.TempDir(), "export")
			if err := os.MkdirAll(bad, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(bad, "Patient.ndjson"), `{"resourceType":"Patient","id":"p-1"}`+"\n")
			writeFile(t, filepath.Join(bad, tc.file), tc.content+"\n")
			out, errOut, code := custos(t, nil, "import", "--data-dir", data, "--tenant", "general-hospital", bad)
			if code == 0 || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "nothing was imported") {
				t.Fatalf("exit %d, want a refusal naming %s:\n%s%s", code, tc.want, out, errOut)
			}
			if strings.Contains(errOut, "SECRET-PHI") {
				t.Fatalf("the error quotes the input: %s", errOut)
			}
			after, err := os.ReadFile(catalog)
			if err != nil || !bytes.Equal(before, after) {
				t.Fatalf("the catalog changed (%v)", err)
			}
		})
	}
}
