package fhirin

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// The resources of NDJSON files an import remembers for its Bundles'
// searches cost a bounded few bytes each (remember: digests, not ids or
// identifiers). The live heap at the last item of an import of n
// Practitioners with an identifier each and one Bundle after them,
// against the same without the Bundle (which remembers nothing), is
// under 200 bytes a resource; docs/import.md gives the figure measured.
func TestRememberNDJSONMemory(t *testing.T) {
	const n = 100_000
	heapAtEnd := func(withBundle bool) uint64 {
		dir := t.TempDir()
		f, err := os.Create(filepath.Join(dir, "Practitioner.ndjson"))
		if err != nil {
			t.Fatal(err)
		}
		w := bufio.NewWriter(f)
		for i := range n {
			fmt.Fprintf(w, `{"resourceType":"Practitioner","id":"pr-%d","identifier":[{"system":"http://hl7.org/fhir/sid/us-npi","value":"%010d"}],"name":[{"family":"Moss"}]}`+"\n", i, i)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if withBundle {
			b := `{"resourceType":"Bundle","type":"transaction","entry":[{"fullUrl":"urn:uuid:5c6d7e8f-0000-4000-8000-0000000000d1","resource":{"resourceType":"Practitioner","identifier":[{"system":"http://hl7.org/fhir/sid/us-npi","value":"0000000007"}]},"request":{"method":"POST","url":"Practitioner","ifNoneExist":"identifier=http://hl7.org/fhir/sid/us-npi|0000000007"}}]}`
			if err := os.WriteFile(filepath.Join(dir, "z-bundle.json"), []byte(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var heap uint64
		items, kept := 0, 0
		err = Read(t.Context(), dir, Options{Link: testLink}, func(it Item) error {
			items++
			if it.Kept {
				kept++
			}
			if items == n {
				var ms runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&ms)
				heap = ms.HeapAlloc
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if withBundle && (items != n+1 || kept != 1) {
			t.Fatalf("items %d (kept %d), want %d and the Bundle's entry kept", items, kept, n+1)
		}
		return heap
	}
	without, with := heapAtEnd(false), heapAtEnd(true)
	per := (int64(with) - int64(without)) / n
	t.Logf("live heap at the last NDJSON item: %d MB with a Bundle in the import, %d MB without: %d bytes per resource remembered", with>>20, without>>20, per)
	if per > 200 {
		t.Errorf("remembering costs %d bytes a resource, want under 200", per)
	}
}
