package fhirin

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeBulkExport writes a Bulk export of n resources to dir, shaped like
// Synthea's: per patient one Patient, Encounters, Conditions, Observations
// (most of them), and a DocumentReference with a base64 note. It returns
// the number of resources written.
func writeBulkExport(tb testing.TB, dir string, n int) int {
	tb.Helper()
	files := map[string]*os.File{}
	enc := map[string]*json.Encoder{}
	emit := func(r map[string]any) {
		typ := r["resourceType"].(string)
		if files[typ] == nil {
			f, err := os.Create(filepath.Join(dir, typ+".ndjson"))
			if err != nil {
				tb.Fatal(err)
			}
			files[typ], enc[typ] = f, json.NewEncoder(f)
		}
		if err := enc[typ].Encode(r); err != nil {
			tb.Fatal(err)
		}
	}
	note := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("Patient seen for follow-up; vitals stable. ", 20)))
	written := 0
	for p := 0; written < n; p++ {
		pid := fmt.Sprintf("%08x-0000-4000-8000-%012x", p, p)
		ref := map[string]any{"reference": "Patient/" + pid}
		emit(map[string]any{"resourceType": "Patient", "id": pid, "meta": map[string]any{"lastUpdated": "2024-05-01T10:00:00Z"},
			"name": []any{map[string]any{"family": fmt.Sprintf("Family%d", p), "given": []any{"Given"}}}, "gender": "female", "birthDate": "1970-01-01"})
		emit(map[string]any{"resourceType": "Encounter", "id": pid[:8] + "-enc", "status": "finished", "class": map[string]any{"code": "AMB"}, "subject": ref})
		emit(map[string]any{"resourceType": "Condition", "id": pid[:8] + "-cond", "subject": ref,
			"code": map[string]any{"coding": []any{map[string]any{"system": "http://snomed.info/sct", "code": "38341003"}}}})
		emit(map[string]any{"resourceType": "DocumentReference", "id": pid[:8] + "-doc", "status": "current", "subject": ref,
			"content": []any{map[string]any{"attachment": map[string]any{"contentType": "text/plain; charset=utf-8", "data": note}}}})
		written += 4
		for o := 0; o < 16 && written < n; o++ {
			emit(map[string]any{"resourceType": "Observation", "id": fmt.Sprintf("%s-obs-%d", pid[:8], o), "status": "final",
				"meta":              map[string]any{"lastUpdated": "2024-05-01T10:00:00Z"},
				"code":              map[string]any{"coding": []any{map[string]any{"system": "http://loinc.org", "code": "8867-4", "display": "Heart rate"}}},
				"subject":           ref,
				"performer":         []any{map[string]any{"reference": "Practitioner/p1"}},
				"effectiveDateTime": "2024-05-01T09:30:00-04:00",
				"valueQuantity":     map[string]any{"value": json.Number("72.0"), "unit": "/min", "system": "http://unitsofmeasure.org", "code": "/min"}})
			written++
		}
	}
	for _, f := range files {
		if err := f.Close(); err != nil {
			tb.Fatal(err)
		}
	}
	return written
}

// BenchmarkReadBulk reads a generated 10,000-resource Bulk export (both
// passes); the import target end to end is 5,000 resources/s.
func BenchmarkReadBulk(b *testing.B) {
	dir := b.TempDir()
	benchRead(b, dir, writeBulkExport(b, dir, 10_000))
}

// BenchmarkReadBundle reads the same 10,000 resources as one transaction
// Bundle (each entry a fullUrl, its resource and a PUT request): the cost
// of the Bundle reader, its envelope included.
func BenchmarkReadBundle(b *testing.B) {
	n, all, _ := bulkEntries(b)
	path := filepath.Join(b.TempDir(), "bundle.json")
	writeTransaction(b, path, all)
	benchRead(b, path, n)
}

// BenchmarkReadBundles reads the same 10,000 resources as a directory of
// transaction Bundles, one a patient (its Patient, Encounter, Condition,
// DocumentReference and Observations), as Synthea writes them.
func BenchmarkReadBundles(b *testing.B) {
	n, _, byPatient := bulkEntries(b)
	dir := b.TempDir()
	for patient, es := range byPatient {
		writeTransaction(b, filepath.Join(dir, patient+".json"), es)
	}
	benchRead(b, dir, n)
}

// bulkEntries writes the Bulk export of BenchmarkReadBulk and returns the
// number of its resources and each as a transaction Bundle's entry, in
// the order of the files' names and lines, all of them and by patient (the
// first 8 characters of every id of a patient's resources).
func bulkEntries(b *testing.B) (n int, all []string, byPatient map[string][]string) {
	bulk := b.TempDir()
	n = writeBulkExport(b, bulk, 10_000)
	files, err := filepath.Glob(filepath.Join(bulk, "*.ndjson"))
	if err != nil {
		b.Fatal(err)
	}
	slices.Sort(files)
	byPatient = map[string][]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		for line := range strings.Lines(string(data)) {
			var head struct{ ResourceType, ID string }
			if err := json.Unmarshal([]byte(line), &head); err != nil {
				b.Fatal(err)
			}
			url := head.ResourceType + "/" + head.ID
			e := `{"fullUrl":"https://ehr.example.org/fhir/` + url + `","resource":` + strings.TrimSpace(line) + `,"request":{"method":"PUT","url":"` + url + `"}}`
			all = append(all, e)
			byPatient[head.ID[:8]] = append(byPatient[head.ID[:8]], e)
		}
	}
	return n, all, byPatient
}

// writeTransaction writes a transaction Bundle of entries to path, an
// entry a line.
func writeTransaction(b *testing.B, path string, entries []string) {
	body := `{"resourceType":"Bundle","type":"transaction","entry":[` + "\n" + strings.Join(entries, ",\n") + "\n]}\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		b.Fatal(err)
	}
}

// benchRead reads path, which holds n resources, in every iteration.
func benchRead(b *testing.B, path string, n int) {
	b.ReportAllocs()
	var bytes int64
	for b.Loop() {
		bytes = 0
		if err := Read(b.Context(), path, Options{Link: testLink}, func(it Item) error {
			bytes += int64(len(it.Body))
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "resources/s")
	b.SetBytes(bytes)
}
