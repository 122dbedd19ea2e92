package fhirin

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
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

// A directory of *.json files whose first Bundle, read before a file
// holding resources outside Bundles (the catalog's two Practitioners of
// one NPI, one of them rewritten there without it), is read first as the
// first pass would read it (firstPassOfBundles) must import as the
// reading of its searches alone (collectSearches) does: the first read
// found "412, two matches" in the first entry, where the first pass proper
// finds one (the rewritten Practitioner no longer has the NPI). That
// problem is dropped with the rest of that read, but before, the entries
// after it were not filed as searches either: the Bundle's second entry,
// a conditional create of the NPI of the resource file's pr3, did not find
// pr3 and created a second Practitioner of that NPI. And 21 such Bundles
// made the first read stop at MaxProblems: the import failed with 20
// problems that the first pass proper does not find.
func TestReadFirstPassOfBundlesFallbackIsExact(t *testing.T) {
	const npi = "http://hl7.org/fhir/sid/us-npi"
	const pr1, pr2, pr3 = "5c6d7e8f-0000-4000-8000-0000000000a1", "5c6d7e8f-0000-4000-8000-0000000000a2", "5c6d7e8f-0000-4000-8000-0000000000a3"
	match := func(typ string, q Search) ([]Found, error) {
		if typ == "Practitioner" && q.System == npi && q.Value == "1111111111" {
			return []Found{{ID: pr1}, {ID: pr2}}, nil // the catalog's two of one NPI
		}
		return nil, nil
	}
	create := func(uuid, value string) string {
		return `{"fullUrl":"urn:uuid:` + uuid + `","resource":{"resourceType":"Practitioner","identifier":[{"system":"` + npi + `","value":"` + value + `"}]},
 "request":{"method":"POST","url":"Practitioner","ifNoneExist":"identifier=` + npi + `|` + value + `"}}`
	}
	write := func(t *testing.T, dir, name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func(t *testing.T, dir string) ([]Item, error) {
		var out []Item
		err := Read(context.Background(), dir, Options{Link: testLink, Match: match}, func(it Item) error {
			out = append(out, it)
			return nil
		})
		return out, err
	}
	resources := func(t *testing.T, dir string) {
		write(t, dir, "Z1-resource.json", `{"resourceType":"Practitioner","id":"`+pr2+`","name":[{"family":"Moss"}]}`)
		write(t, dir, "Z2-resource.json", `{"resourceType":"Practitioner","id":"`+pr3+`","identifier":[{"system":"`+npi+`","value":"2222222222"}]}`)
	}

	dir := t.TempDir()
	write(t, dir, "A-bundle.json", `{"resourceType":"Bundle","type":"transaction","entry":[`+
		create("5c6d7e8f-0000-4000-8000-0000000000b1", "1111111111")+`,`+
		create("5c6d7e8f-0000-4000-8000-0000000000b2", "2222222222")+`]}`)
	resources(t, dir)
	items, err := read(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]bool{}
	for _, it := range items {
		if it.Type != "Practitioner" {
			continue
		}
		if it.Kept {
			kept[it.ID] = true
		} else if it.ID != pr2 && it.ID != pr3 {
			t.Errorf("Practitioner %s created; want the Bundle's creates to keep %s and %s", it.ID, pr1, pr3)
		}
	}
	if !kept[pr1] || !kept[pr3] {
		t.Errorf("kept %v; want %s and %s", kept, pr1, pr3)
	}

	dir = t.TempDir()
	for i := range MaxProblems + 1 {
		write(t, dir, fmt.Sprintf("A%02d-bundle.json", i), `{"resourceType":"Bundle","type":"transaction","entry":[`+
			create(fmt.Sprintf("5c6d7e8f-0000-4000-8000-0000000001%02d", i), "1111111111")+`]}`)
	}
	resources(t, dir)
	if _, err := read(t, dir); err != nil {
		t.Errorf("%d Bundles each keeping the one match the first pass finds: %v", MaxProblems+1, err)
	}
}

// firstPassOfBundles reads an input of *.json files and NDJSON files not
// named for a type as the first pass when it holds Bundles alone, and
// falls back to collectSearches and the first pass proper when it finds a
// resource outside a Bundle: the import must be what that path alone
// gives. The same input with one file of one type more (a Location, which
// no search names) takes that path from the start; the items but that
// Location must be the same, in the same order. Outside data: the
// Synthea-style Bundle, HL7's R4 IPS document, Observation/f003 and
// Consent examples, Binary/example and DocumentReference/example.
func TestReadFirstPassOfBundlesDifferential(t *testing.T) {
	const npi = "http://hl7.org/fhir/sid/us-npi"
	const pr1, pr2, pr3 = "5c6d7e8f-0000-4000-8000-0000000000a1", "5c6d7e8f-0000-4000-8000-0000000000a2", "5c6d7e8f-0000-4000-8000-0000000000a3"
	file := func(parts ...string) string {
		var b []byte
		for _, p := range parts {
			c, err := os.ReadFile(filepath.Join(append([]string{"testdata"}, strings.Split(p, "/")...)...))
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, c...)
		}
		return string(b)
	}
	create := func(uuid, value string) string {
		return `{"fullUrl":"urn:uuid:` + uuid + `","resource":{"resourceType":"Practitioner","identifier":[{"system":"` + npi + `","value":"` + value + `"}]},
 "request":{"method":"POST","url":"Practitioner","ifNoneExist":"identifier=` + npi + `|` + value + `"}}`
	}
	update := `{"fullUrl":"urn:uuid:5c6d7e8f-0000-4000-8000-0000000000c1","resource":{"resourceType":"Practitioner","identifier":[{"system":"` + npi + `","value":"3333333333"}],"name":[{"family":"Lind"}]},
 "request":{"method":"PUT","url":"Practitioner?identifier=` + npi + `|3333333333"}}`
	binary := strings.TrimSpace(file("outside/hl7-r4-binary/Binary.ndjson"))
	docRef := strings.TrimSpace(file("outside/hl7-r4-binary/DocumentReference.ndjson"))
	withBinary := `{"resourceType":"Bundle","type":"transaction","entry":[
{"fullUrl":"urn:uuid:d1d1d1d1-0000-4000-8000-0000000000d3","resource":` + docRef + `,"request":{"method":"PUT","url":"DocumentReference/example"}},
{"fullUrl":"urn:uuid:b1b1b1b1-0000-4000-8000-0000000000b3","resource":` + binary + `,"request":{"method":"PUT","url":"Binary/example"}}]}`
	conditional := `{"resourceType":"Bundle","type":"transaction","entry":[` +
		create("5c6d7e8f-0000-4000-8000-0000000000b1", "1111111111") + `,` +
		create("5c6d7e8f-0000-4000-8000-0000000000b2", "2222222222") + `,` + update + `]}`
	again := `{"resourceType":"Bundle","type":"transaction","entry":[` + create("5c6d7e8f-0000-4000-8000-0000000000b4", "3333333333") + `]}`
	match := func(typ string, q Search) ([]Found, error) {
		if typ == "Practitioner" && q.System == npi && q.Value == "1111111111" {
			return []Found{{ID: pr1}, {ID: pr2}}, nil
		}
		return nil, nil
	}
	shapes := map[string]map[string]string{
		"Bundles alone": {"synthea.json": file("synthea-bundle.json"), "ips.json": file("ips-document.json")},
		"Bundles and NDJSON not named for a type": {"synthea.json": file("synthea-bundle.json"),
			"export.ndjson": file("outside/hl7-r4-consent/Observation.ndjson", "outside/hl7-r4-consent/Consent.ndjson")},
		"resource files beside Bundles":  {"A-synthea.json": file("synthea-bundle.json"), "B-observation.json": file("outside/hl7-r4-consent/Observation.ndjson")},
		"one Bundle twice with a Binary": {"a.json": withBinary, "b.json": withBinary},
		"conditional entries across files": {"A-bundle.json": conditional, "M-again.json": again,
			"Z1-resource.json": `{"resourceType":"Practitioner","id":"` + pr2 + `","name":[{"family":"Moss"}]}`,
			"Z2-resource.json": `{"resourceType":"Practitioner","id":"` + pr3 + `","identifier":[{"system":"` + npi + `","value":"2222222222"}]}`},
		"conditional entries, Bundles alone": {"A-bundle.json": conditional, "M-again.json": again},
		"conditional entries of Bundles alone": {"A-bundle.json": `{"resourceType":"Bundle","type":"transaction","entry":[` +
			create("5c6d7e8f-0000-4000-8000-0000000000b2", "2222222222") + `,` + update + `]}`, "M-again.json": again},
	}
	read := func(t *testing.T, files map[string]string) ([]Item, error) {
		dir := t.TempDir()
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var out []Item
		err := Read(context.Background(), dir, Options{Link: testLink, Match: match}, func(it Item) error {
			if it.Type != "Location" || it.ID != "differential" {
				out = append(out, it)
			}
			return nil
		})
		return out, err
	}
	for name, files := range shapes {
		got, err := read(t, files)
		typed := maps.Clone(files)
		typed["Location.ndjson"] = `{"resourceType":"Location","id":"differential","name":"Ward 7"}` + "\n"
		want, werr := read(t, typed)
		if fmt.Sprint(err) != fmt.Sprint(werr) {
			t.Errorf("%s: %v; with a file of one type more: %v", name, err, werr)
			continue
		}
		if err != nil {
			if name != "conditional entries, Bundles alone" {
				t.Errorf("%s: %v", name, err)
			}
			continue // FHIR's 412: the catalog's two Practitioners of the NPI
		}
		if len(got) == 0 || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %d items, with a file of one type more %d; want the same items", name, len(got), len(want))
			for i := range min(len(got), len(want)) {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Errorf("  first difference at item %d: %s/%s kept=%v, %s/%s kept=%v", i, got[i].Type, got[i].ID, got[i].Kept, want[i].Type, want[i].ID, want[i].Kept)
					break
				}
			}
		}
	}
}

// Files of one type beside Bundles (a Bulk export's Practitioner.ndjson
// and a transaction Bundle) are read twice each, the Bundles three times:
// once for their conditional searches, which bound what the passes
// remember of those files' resources (TestRememberNDJSONMemory), then by
// each pass after those resources. That first read cannot be the first
// pass's read of the Bundles (as it is for Bundles alone,
// firstPassOfBundles): the first pass reads the Bundles after the
// resources outside them, whose ids the searches find. Read so (reviewed
// 2026-12-06, h-import10), a catalog's two Practitioners of one NPI, one
// rewritten without it by Practitioner.ndjson, made the Bundle's
// conditional create FHIR's 412 and failed the import, where the passes
// find one match and keep it.
func TestReadTypedBesideBundlesReadForSearchesFirst(t *testing.T) {
	const npi = "http://hl7.org/fhir/sid/us-npi"
	const pr1, pr2 = "5c6d7e8f-0000-4000-8000-0000000000a1", "5c6d7e8f-0000-4000-8000-0000000000a2"
	match := func(typ string, q Search) ([]Found, error) {
		if typ == "Practitioner" && q.System == npi && q.Value == "1111111111" {
			return []Found{{ID: pr1}, {ID: pr2}}, nil // the catalog's two of one NPI
		}
		return nil, nil
	}
	dir := t.TempDir()
	for name, content := range map[string]string{
		"A-bundle.json": `{"resourceType":"Bundle","type":"transaction","entry":[{"fullUrl":"urn:uuid:5c6d7e8f-0000-4000-8000-0000000000b1","resource":{"resourceType":"Practitioner","identifier":[{"system":"` + npi + `","value":"1111111111"}]},
 "request":{"method":"POST","url":"Practitioner","ifNoneExist":"identifier=` + npi + `|1111111111"}}]}`,
		"Practitioner.ndjson": `{"resourceType":"Practitioner","id":"` + pr2 + `","name":[{"family":"Moss"}]}` + "\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	reads := map[string]int{}
	afterRead = func(p string) { reads[filepath.Base(p)]++ }
	defer func() { afterRead = nil }()
	var items []Item
	err := Read(context.Background(), dir, Options{Link: testLink, Match: match}, func(it Item) error {
		items = append(items, it)
		return nil
	})
	if err != nil {
		t.Fatalf("Read: %v; want the Bundle's conditional create to keep the one match left", err)
	}
	if it := find(t, items, "Practitioner", pr1); !it.Kept {
		t.Errorf("Practitioner %s not kept; want the conditional create to keep it", pr1)
	}
	find(t, items, "Practitioner", pr2)
	if len(items) != 2 {
		t.Errorf("%d items, want the two Practitioners", len(items))
	}
	if want := map[string]int{"A-bundle.json": 3, "Practitioner.ndjson": 2}; !maps.Equal(reads, want) {
		t.Errorf("reads %v, want %v", reads, want)
	}
}
