package synth

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/uuid"
)

// The same data set in standard FHIR R4 formats, beside the manifest, so
// the demo and the benchmarks can import what a hospital would export.
const (
	// BulkDir holds a FHIR Bulk Data export: <Type>.ndjson, one resource
	// a line, in manifest order.
	BulkDir = "bulk"
	// BulkManifestFile is the $export manifest naming BulkDir's files.
	BulkManifestFile = "bulk-export.json"
	// BundlesDir holds one transaction Bundle per patient:
	// <patient id>.json, with urn:uuid references between its entries,
	// and one of the tenant-level resources (the payers' Organizations),
	// referenceBundle.
	BundlesDir = "bundles"
)

// referenceBundle names the Bundle of tenant-level resources in BundlesDir
// (with ".json"); a patient's is named by its UUID, so no name is shared.
const referenceBundle = "organizations"

// Security labels as FHIR writes them (docs/import.md, "Labels").
var labelCodings = map[string]coding{
	"hiv": {System: "http://terminology.hl7.org/CodeSystem/v3-ActCode", Code: "HIV", Display: "HIV/AIDS information sensitivity"},
	"sud": {System: "http://terminology.hl7.org/CodeSystem/v3-ActCode", Code: "42CFRPart2", Display: "42 CFR Part2"},
	"vip": {System: "http://terminology.hl7.org/CodeSystem/v3-ActCode", Code: "CELEB", Display: "celebrity information sensitivity"},
}

// consentNamespace derives the opted-out patient's Consent id from the
// patient id (a name-based UUID: deterministic, and new only for synth).
var consentNamespace = uuid.MustParse("5b0c6e1c-3f57-4d0e-9a43-2d8e1f3c7a90")

// fhirWriter writes the standard FHIR copies while the manifest is read back.
type fhirWriter struct {
	dir   string
	opts  Options
	bulk  map[string]*bufio.Writer
	files map[string]*os.File
	types []string // Bulk files in order of first use
	bytes int64
}

// writeFHIR reads the manifest written so far and writes the same data
// set as a Bulk export (BulkDir, BulkManifestFile) and per-patient
// transaction Bundles (BundlesDir): FHIR resources as they are, notes as
// DocumentReferences, lab reports as DiagnosticReport.presentedForm, images
// as Media, labels in meta.security, and an opt-out as an active Consent
// that denies. One patient is in memory at a time.
func (g *generator) writeFHIR(manifestPath string) (int64, error) {
	w := &fhirWriter{dir: g.dir, opts: g.opts, bulk: map[string]*bufio.Writer{}, files: map[string]*os.File{}}
	defer w.close()
	f, err := os.Open(manifestPath)
	if err != nil {
		return 0, fmt.Errorf("synth: read manifest: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var group []manifestEntry
	for sc.Scan() {
		var e manifestEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return 0, fmt.Errorf("synth: read manifest: %w", err)
		}
		if len(group) > 0 && group[0].Labels.Patient != e.Labels.Patient {
			if err := w.patient(group); err != nil {
				return 0, err
			}
			group = group[:0]
		}
		group = append(group, e)
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("synth: read manifest: %w", err)
	}
	if len(group) > 0 {
		if err := w.patient(group); err != nil {
			return 0, err
		}
	}
	if err := w.flush(); err != nil {
		return 0, err
	}
	if err := w.writeBulkManifest(); err != nil {
		return 0, err
	}
	return w.bytes, nil
}

// patient writes one patient's resources to the Bulk files and its Bundle
// (tenant-level resources, patient "", to the Bulk files and the Bundle
// referenceBundle).
func (w *fhirWriter) patient(group []manifestEntry) error {
	patient := group[0].Labels.Patient
	var resources []map[string]any
	for _, e := range group {
		r, err := w.resource(e)
		if err != nil {
			return err
		}
		resources = append(resources, r)
	}
	if slices.Contains(group[0].Labels.Consent, "opt-out") {
		resources = append(resources, map[string]any{
			"resourceType": "Consent",
			"id":           uuid.NewSHA1(consentNamespace, []byte(patient)).String(),
			"meta":         map[string]any{"lastUpdated": w.opts.Now.Format(dateTimeFmt)},
			"status":       "active",
			"scope":        concept("http://terminology.hl7.org/CodeSystem/consentscope", "patient-privacy", "Privacy Consent"),
			"category":     []any{concept("http://loinc.org", "59284-0", "Patient Consent")},
			"patient":      map[string]any{"reference": "Patient/" + patient},
			"dateTime":     w.opts.Now.Format("2006-01-02"),
			"policyRule":   concept("http://terminology.hl7.org/CodeSystem/v3-ActCode", "OPTOUT", "opt out"),
			"provision":    map[string]any{"type": "deny"},
		})
	}
	for _, r := range resources {
		if err := w.bulkLine(r); err != nil {
			return err
		}
	}
	if patient == "" {
		return w.bundle(referenceBundle, resources) // tenant-level (the payers): a Bundle of their own
	}
	return w.bundle(patient, resources)
}

// resource is the FHIR resource for one manifest entry.
func (w *fhirWriter) resource(e manifestEntry) (map[string]any, error) {
	data, err := os.ReadFile(filepath.Join(w.dir, e.File))
	if err != nil {
		return nil, fmt.Errorf("synth: read %s: %w", e.File, err)
	}
	id := strings.TrimSuffix(filepath.Base(e.File), filepath.Ext(e.File))
	subject := map[string]any{"reference": "Patient/" + e.Labels.Patient}
	attachment := func() map[string]any {
		return map[string]any{"contentType": e.MimeType, "data": base64.StdEncoding.EncodeToString(data), "title": e.Title}
	}
	var r map[string]any
	switch e.Labels.Type {
	case "note":
		r = map[string]any{"resourceType": "DocumentReference", "id": id, "status": "current",
			"type": concept("http://loinc.org", "11506-3", "Progress note"), "subject": subject, "date": e.Annotations.LastModified,
			"content": []any{map[string]any{"attachment": attachment()}}}
	case "report":
		r = map[string]any{"resourceType": "DiagnosticReport", "id": id, "status": "final",
			"code": concept("http://loinc.org", "11502-2", "Laboratory report"), "subject": subject, "issued": e.Annotations.LastModified,
			"presentedForm": []any{attachment()}}
	case "image":
		r = map[string]any{"resourceType": "Media", "id": id, "status": "completed", "subject": subject,
			"issued": e.Annotations.LastModified, "content": attachment()}
	default:
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("synth: read %s: %w", e.File, err)
		}
	}
	meta, _ := r["meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{"lastUpdated": e.Annotations.LastModified}
		r["meta"] = meta
	}
	var security []any
	for _, l := range e.Labels.Sensitivity {
		if c, ok := labelCodings[l]; ok {
			security = append(security, c)
		}
	}
	if len(security) > 0 {
		meta["security"] = security
	}
	return r, nil
}

func concept(system, code, display string) map[string]any {
	return map[string]any{"coding": []any{coding{System: system, Code: code, Display: display}}, "text": display}
}

// encode is compact JSON without HTML escaping, newline-terminated.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("synth: encode FHIR: %w", err)
	}
	return buf.Bytes(), nil
}

func (w *fhirWriter) bulkLine(r map[string]any) error {
	typ := r["resourceType"].(string)
	bw := w.bulk[typ]
	if bw == nil {
		if err := os.MkdirAll(filepath.Join(w.dir, BulkDir), 0o700); err != nil {
			return fmt.Errorf("synth: create %s: %w", BulkDir, err)
		}
		f, err := os.OpenFile(filepath.Join(w.dir, BulkDir, typ+".ndjson"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fmt.Errorf("synth: create bulk file: %w", err)
		}
		w.files[typ], w.types = f, append(w.types, typ)
		bw = bufio.NewWriterSize(f, 64<<10)
		w.bulk[typ] = bw
	}
	b, err := encode(r)
	if err != nil {
		return err
	}
	w.bytes += int64(len(b))
	if _, err := bw.Write(b); err != nil {
		return fmt.Errorf("synth: write bulk file: %w", err)
	}
	return nil
}

// bundle writes the patient's transaction Bundle: every entry POSTed under
// its urn:uuid fullUrl, and references between entries written as those
// urn:uuids, as Synthea does.
func (w *fhirWriter) bundle(patient string, resources []map[string]any) error {
	ids := map[string]bool{}
	for _, r := range resources {
		ids[r["resourceType"].(string)+"/"+r["id"].(string)] = true
	}
	entries := make([]any, 0, len(resources))
	for _, r := range resources {
		toURN(r, ids)
		entries = append(entries, map[string]any{
			"fullUrl":  "urn:uuid:" + r["id"].(string),
			"resource": r,
			"request":  map[string]any{"method": "POST", "url": r["resourceType"]},
		})
	}
	b, err := encode(map[string]any{"resourceType": "Bundle", "type": "transaction", "entry": entries})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(w.dir, BundlesDir), 0o700); err != nil {
		return fmt.Errorf("synth: create %s: %w", BundlesDir, err)
	}
	w.bytes += int64(len(b))
	return writeNew(filepath.Join(w.dir, BundlesDir, patient+".json"), b)
}

// toURN rewrites, in place, every reference "Type/id" to an entry of ids
// into "urn:uuid:id".
func toURN(v any, ids map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			if s, ok := c.(string); ok && k == "reference" && ids[s] {
				_, id, _ := strings.Cut(s, "/")
				v[k] = "urn:uuid:" + id
				continue
			}
			toURN(c, ids)
		}
	case []any:
		for _, c := range v {
			toURN(c, ids)
		}
	}
}

func (w *fhirWriter) flush() error {
	for _, typ := range w.types {
		if err := w.bulk[typ].Flush(); err != nil {
			return fmt.Errorf("synth: write bulk file: %w", err)
		}
		if err := w.files[typ].Close(); err != nil {
			return fmt.Errorf("synth: close bulk file: %w", err)
		}
		delete(w.files, typ)
	}
	return nil
}

func (w *fhirWriter) close() {
	for _, f := range w.files {
		f.Close()
	}
}

// writeBulkManifest writes the $export manifest of BulkDir.
func (w *fhirWriter) writeBulkManifest() error {
	type file struct {
		Type string `json:"type"`
		URL  string `json:"url"`
	}
	m := struct {
		TransactionTime     string `json:"transactionTime"`
		RequiresAccessToken bool   `json:"requiresAccessToken"`
		Output              []file `json:"output"`
		Error               []file `json:"error"`
	}{TransactionTime: w.opts.Now.Format(dateTimeFmt), Output: []file{}, Error: []file{}}
	types := slices.Clone(w.types)
	slices.Sort(types)
	for _, t := range types {
		m.Output = append(m.Output, file{Type: t, URL: BulkDir + "/" + t + ".ndjson"})
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("synth: encode bulk manifest: %w", err)
	}
	b = append(b, '\n')
	w.bytes += int64(len(b))
	return writeNew(filepath.Join(w.dir, BulkManifestFile), b)
}
