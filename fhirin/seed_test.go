package fhirin_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/fhirin"
	"github.com/custos-mcp/custos/store/synth"
)

// The standard FHIR copies `custos seed` writes (a Bulk export with its
// $export manifest, per-patient transaction Bundles) read back as the same
// data set as its manifest: every resource in the same patient
// compartment with the same labels and consent, and every note, report
// and image as an attachment with the same bytes and MIME type.
func TestReadSeed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "seed")
	if _, err := synth.Generate(t.Context(), dir, synth.Options{Patients: 12, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	type entry struct {
		URI      string `json:"uri"`
		MIMEType string `json:"mimeType"`
		File     string `json:"file"`
		Labels   struct {
			Patient     string   `json:"patient"`
			Type        string   `json:"type"`
			Sensitivity []string `json:"sensitivity"`
			Consent     []string `json:"consent"`
		} `json:"labels"`
	}
	mf, err := os.Open(filepath.Join(dir, synth.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	defer mf.Close()
	var entries []entry
	sc := bufio.NewScanner(mf)
	for sc.Scan() {
		var e entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	carriers := map[string]string{"note": "DocumentReference/%s/content[0].attachment", "report": "DiagnosticReport/%s/presentedForm[0]", "image": "Media/%s/content"}

	for _, path := range []string{filepath.Join(dir, synth.BulkManifestFile), filepath.Join(dir, synth.BundlesDir)} {
		items := map[string]fhirin.Item{}
		consents := 0
		err := fhirin.Read(t.Context(), path, fhirin.Options{Link: func(typ, id, patient string) string { return "attachment://t/x" }}, func(it fhirin.Item) error {
			items[strings.ToLower(it.Type)+"/"+it.ID] = it
			if it.Type == "Consent" {
				consents++
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(path), err)
		}
		optedOut := map[string]bool{}
		for _, e := range entries {
			id := strings.TrimSuffix(filepath.Base(e.File), filepath.Ext(e.File))
			key := e.Labels.Type + "/" + id
			if pattern, ok := carriers[e.Labels.Type]; ok {
				key = "attachment/" + strings.Replace(pattern, "%s", id, 1)
			}
			it, ok := items[key]
			if !ok {
				t.Errorf("%s: no item for %s", filepath.Base(path), e.URI)
				continue
			}
			if it.Patient != e.Labels.Patient || !slices.Equal(it.Sensitivity, e.Labels.Sensitivity) || !slices.Equal(it.Consent, e.Labels.Consent) {
				t.Errorf("%s: %s: patient %q labels %v consent %v; the manifest says %q %v %v", filepath.Base(path), key,
					it.Patient, it.Sensitivity, it.Consent, e.Labels.Patient, e.Labels.Sensitivity, e.Labels.Consent)
			}
			if _, ok := carriers[e.Labels.Type]; ok {
				want, err := os.ReadFile(filepath.Join(dir, e.File))
				if err != nil || !bytes.Equal(it.Body, want) || it.MIMEType != e.MIMEType {
					t.Errorf("%s: %s: %d bytes of %s, want the %d of %s", filepath.Base(path), key, len(it.Body), it.MIMEType, len(want), e.MIMEType)
				}
			}
			if len(e.Labels.Consent) > 0 {
				optedOut[e.Labels.Patient] = true
			}
		}
		if consents != len(optedOut) || consents == 0 {
			t.Errorf("%s: %d Consents for %d opted-out patients", filepath.Base(path), consents, len(optedOut))
		}
	}
}
