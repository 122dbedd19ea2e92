package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/custos-mcp/custos/store"
)

// A server reads through a Live catalog while 'custos import' replaces the
// file with ImportStaged; Reload (run every second by Watch) swaps the new
// file in and reports what changed.
func ExampleLive() {
	dir, err := os.MkdirTemp("", "custos-live-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	const uri = "note://general-hospital/patients/0b5c1f7e-3c2a-4d7e-9f10-2a3b4c5d6e7f/notes/3f2a9c1e-8b7d-4e6f-a5b4-c3d2e1f0a9b8"
	importNote := func(text string) {
		os.WriteFile(filepath.Join(dir, "n.md"), []byte(text), 0o600)
		os.WriteFile(filepath.Join(dir, store.ManifestName), []byte(`{"uri":"`+uri+`","name":"note","mimeType":"text/markdown",`+
			`"labels":{"tenant":"general-hospital","patient":"0b5c1f7e-3c2a-4d7e-9f10-2a3b4c5d6e7f","type":"note"},"file":"n.md"}`+"\n"), 0o600)
		if _, err := store.ImportStaged(context.Background(), filepath.Join(dir, "catalog.db"), dir, store.Options{}, nil); err != nil {
			panic(err)
		}
	}
	importNote("# first version\n")

	live, err := store.OpenLive(filepath.Join(dir, "catalog.db"), store.LiveOptions{
		OnChange: func(c store.Change) { fmt.Println("updated:", len(c.Updated), "list changed:", c.ListChanged()) },
	})
	if err != nil {
		panic(err)
	}
	defer live.Close()

	importNote("# second version\n") // while live holds the catalog open
	if _, _, err := live.Reload(); err != nil {
		panic(err)
	}
	r, _ := live.Get(uri)
	fmt.Println("version", r.Version)
	// Output:
	// updated: 1 list changed: false
	// version 2
}
