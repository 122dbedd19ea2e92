package fhirin

import (
	"os"
	"path/filepath"
	"testing"
)

// An input whose files may hold Bundles and resources outside them alike
// (*.json) but hold Bundles alone, as Synthea writes its patients, is read
// twice, as a Bundle file of one type is: the first read is the first
// pass, collecting the Bundles' conditional searches on the way. Before,
// it was read once more for those searches alone: three times.
// One that holds a resource outside a Bundle too is read as before, and a
// Bundle read before that resource (A-bundle.json, then practitioner.json)
// still finds it: its conditional create keeps the Practitioner.
func TestReadBundlesAloneReadTwice(t *testing.T) {
	synthea, err := os.ReadFile(filepath.Join("testdata", "synthea-bundle.json"))
	if err != nil {
		t.Fatal(err)
	}
	ips, err := os.ReadFile(filepath.Join("testdata", "ips-document.json"))
	if err != nil {
		t.Fatal(err)
	}
	count := func(t *testing.T, dir string) (map[string]int, []Item) {
		reads := map[string]int{}
		afterRead = func(p string) { reads[filepath.Base(p)]++ }
		defer func() { afterRead = nil }()
		return reads, mustReadAll(t, dir)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "synthea.json"), synthea, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ips.json"), ips, 0o644); err != nil {
		t.Fatal(err)
	}
	reads, items := count(t, dir)
	if reads["synthea.json"] != 2 || reads["ips.json"] != 2 {
		t.Errorf("Bundles alone: reads %v, want each file read twice", reads)
	}
	find(t, items, "Patient", "a3c9e7d1-2b4f-4e6a-8c0d-1f2e3a4b5c6d")

	const npi, pr = "http://hl7.org/fhir/sid/us-npi", "5c6d7e8f-0000-4000-8000-0000000000f1"
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "A-bundle.json"), []byte(`{"resourceType":"Bundle","type":"transaction","entry":[
{"fullUrl":"urn:uuid:5c6d7e8f-0000-4000-8000-0000000000f2","resource":{"resourceType":"Practitioner","identifier":[{"system":"`+npi+`","value":"9999994392"}]},
 "request":{"method":"POST","url":"Practitioner","ifNoneExist":"identifier=`+npi+`|9999994392"}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "practitioner.json"), []byte(`{"resourceType":"Practitioner","id":"`+pr+`","identifier":[{"system":"`+npi+`","value":"9999994392"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	reads, items = count(t, dir)
	if reads["A-bundle.json"] != 3 {
		t.Errorf("beside a resource file: reads %v, want the Bundle file read three times", reads)
	}
	if it := find(t, items, "Practitioner", pr); it.Kept {
		t.Errorf("the resource file's Practitioner is kept, want it imported")
	}
	kept := 0
	for _, it := range items {
		if it.Type == "Practitioner" && it.Kept && it.ID == pr {
			kept++
		}
	}
	if kept != 1 {
		t.Errorf("%d kept items of the Practitioner, want the Bundle's conditional create to keep it", kept)
	}
}
