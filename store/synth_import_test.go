package store_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/custos-mcp/custos/store"
	"github.com/custos-mcp/custos/store/synth"
)

// TestImportSynthDataSet imports what `custos seed` writes: the manifest
// contract between store/synth and store.
func TestImportSynthDataSet(t *testing.T) {
	dir := t.TempDir()
	sum, err := synth.Generate(context.Background(), dir, synth.Options{Patients: 12})
	if err != nil {
		t.Fatalf("synth.Generate: %v", err)
	}
	s, err := store.Open(filepath.Join(t.TempDir(), "store.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep, err := s.Import(context.Background(), dir, nil)
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	if rep.Lines != sum.Resources || rep.Created != sum.Resources {
		t.Fatalf("report %+v, synth wrote %d resources", rep, sum.Resources)
	}
	n, err := s.Count()
	if err != nil || n != sum.Resources {
		t.Fatalf("Count = %d, %v, want %d", n, err, sum.Resources)
	}
	byType := map[string]int{}
	after := ""
	for {
		page, err := s.Page(after, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page {
			byType[r.Labels.Type]++
			b, err := s.Blob(context.Background(), r.Digest)
			if err != nil || int64(len(b)) != r.Size {
				t.Fatalf("Blob(%s): %d bytes, %v", r.Digest, len(b), err)
			}
		}
		if len(page) < 100 {
			break
		}
		after = page[len(page)-1].URI
	}
	for typ, want := range sum.ByType {
		if byType[typ] != want {
			t.Errorf("type %s: %d imported, synth wrote %d", typ, byType[typ], want)
		}
	}
	rep, err = s.Import(context.Background(), dir, nil)
	if err != nil || rep.Unchanged != sum.Resources {
		t.Fatalf("re-import: %+v, %v", rep, err)
	}
}
