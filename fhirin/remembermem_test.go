package fhirin

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// An import remembers, of the resources of its NDJSON files, only those
// its Bundles' conditional searches may find (rememberOutside): however
// many there are beside a Bundle, the memory stays that of the searches.
// The live heap at the last NDJSON item of an import of n Practitioners
// with an identifier each and one Bundle (whose conditional create finds
// one of them) is within 1 MiB of the same without the Bundle (which
// remembers nothing); docs/import.md gives the figures measured. Before,
// every resource with an identifier was remembered: 12 MB more for
// 100,000, about 127 bytes each.
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
	more := int64(with) - int64(without)
	t.Logf("live heap at the last NDJSON item of %d: %d KiB with a Bundle in the import, %d KiB without: %d KiB more", n, with>>10, without>>10, more>>10)
	if more > 1<<20 {
		t.Errorf("remembering costs %d bytes for %d resources (%d a resource), want under 1 MiB in all", more, n, more/n)
	}
}
