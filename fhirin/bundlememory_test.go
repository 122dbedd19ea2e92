package fhirin

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/internal/synthbundle"
)

// TestBundleReadHoldsOneCopy reads an 8 MB transaction Bundle (synthbundle:
// urn:uuid references between entries, base64 notes) as a file and as a
// .json.gz file, and measures the heap a Read retains once the Bundle is
// indexed (after a collection, at the first item the last pass yields):
// one copy of the Bundle's bytes and its entries' index, less than twice
// its size. Through the decoder alone it was about three times its size
// (the decoder's buffer, grown to a power of two past the Bundle, beside
// the copy Decode returns: docs/benchmarks.md, "A large Bundle's memory"),
// for the file (readJSONFile) and the gzipped file (readJSON's release).
func TestBundleReadHoldsOneCopy(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "big.json")
	sum := writeSynthBundle(t, plain, 8_000_000)
	gz := filepath.Join(dir, "big.json.gz")
	data, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gz, []byte(gzipped(string(data))), 0o600); err != nil {
		t.Fatal(err)
	}
	data = nil // not part of what Read retains
	for _, path := range []string{plain, gz} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			var before, at runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			items := 0
			err := Read(t.Context(), path, Options{Link: testLink}, func(it Item) error {
				if items++; items == 1 {
					runtime.GC()
					runtime.ReadMemStats(&at)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if items < sum.Resources {
				t.Fatalf("read %d items of a Bundle of %d resources", items, sum.Resources)
			}
			retained := int64(at.HeapAlloc) - int64(before.HeapAlloc)
			ratio := float64(retained) / float64(sum.Bytes)
			t.Logf("%d-byte Bundle of %d entries: %d bytes of heap retained at the first item (%.2f × its size)", sum.Bytes, sum.Resources, retained, ratio)
			if ratio >= 2 {
				t.Errorf("a Read retained %.2f × the Bundle's size once it was indexed; want under 2 (one copy of its bytes and the index)", ratio)
			}
		})
	}
}

// TestJSONFileReadIntoOneSlice: a Bundle file is read into one slice of its
// size (readJSONFile), not through a json.Decoder, whose buffer grew by
// doubling past the Bundle (each buffer it grew through left as garbage)
// and whose Decode copied it once more: at least three times its size
// allocated a read, where the peak RSS of a read is made (a 250 MB
// Bundle's read peaked at 1.25 GiB). The Bundle's entries are not read
// (bundleReading.split fails at once, a problem Read reports), so what a
// read allocates is the file's reading: under 1.5 × the file a read here,
// 3 × or more through the decoder.
func TestJSONFileReadIntoOneSlice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.json")
	sum := writeSynthBundle(t, path, 8_000_000)
	saved := bundleReading
	bundleReading.split = func([]byte, int) (map[string]any, []*entry, error) { return nil, nil, errNotObject }
	defer func() { bundleReading = saved }()
	reads := 0
	afterRead = func(string) { reads++ }
	defer func() { afterRead = nil }()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := Read(t.Context(), path, Options{Link: testLink}, func(Item) error { return nil })
	runtime.ReadMemStats(&after)
	if err == nil || reads == 0 {
		t.Fatalf("Read of a Bundle the split refuses: %v after %d reads; want its error", err, reads)
	}
	perRead := float64(after.TotalAlloc-before.TotalAlloc) / float64(reads) / float64(sum.Bytes)
	t.Logf("%d reads of a %d-byte Bundle: %.2f × its size allocated a read", reads, sum.Bytes, perRead)
	if perRead >= 1.5 {
		t.Errorf("a read of a Bundle file allocated %.2f × its size; want under 1.5 (one slice of the file)", perRead)
	}
}

// writeSynthBundle writes a synthbundle transaction Bundle of about size
// bytes to path.
func writeSynthBundle(t *testing.T, path string, size int64) synthbundle.Summary {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := synthbundle.Write(f, synthbundle.Options{Bytes: size})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// TestReadJSONFileAsReadJSON: readJSONFile gives what readJSON gives on
// the same stream, items, problems and error, whether it reads the file
// whole or hands it to readJSON: a file of the size its Stat gave, one
// that grew or shrank since, one whose read fails part way, one cut short
// (not JSON).
func TestReadJSONFileAsReadJSON(t *testing.T) {
	data, err := os.ReadFile("testdata/synthea-bundle.json")
	if err != nil {
		t.Fatal(err)
	}
	failing := func() io.Reader {
		return io.MultiReader(bytes.NewReader(data[:1000]), failingReader{errors.New("input/output error")})
	}
	whole := func() io.Reader { return bytes.NewReader(data) }
	cut := func() io.Reader { return bytes.NewReader(data[:len(data)/2]) }
	for _, c := range []struct {
		name string
		r    func() io.Reader
		size int64
	}{
		{"as stated", whole, int64(len(data))},
		{"grew", whole, int64(len(data)) - 10},
		{"shrank", whole, int64(len(data)) + 10},
		{"read failed", failing, int64(len(data))},
		{"cut short", cut, int64(len(data) / 2)},
	} {
		t.Run(c.name, func(t *testing.T) {
			read := func(fn func(rd *reader, s *source) error) string {
				var items []string
				rd := &reader{ctx: t.Context(), opts: Options{Link: testLink}, log: slog.New(slog.DiscardHandler), idx: newIndex(), seen: map[string]bool{},
					emit: true, bundlePhase: true, yield: func(it Item) error {
						items = append(items, fmt.Sprintf("%s/%s %s %q", it.Type, it.ID, it.Patient, it.Body))
						return nil
					}}
				err := fn(rd, &source{path: "b.json", name: "b.json"})
				return fmt.Sprintf("items %q\nproblems %v\nerror %v", items, rd.problems, err)
			}
			got := read(func(rd *reader, s *source) error { return rd.readJSONFile(s, c.r(), c.size) })
			want := read(func(rd *reader, s *source) error { return rd.readJSON(s, c.r()) })
			if got != want {
				t.Errorf("readJSONFile:\n%s\nreadJSON:\n%s", got, want)
			}
			if !strings.Contains(want, "Observation/") && c.name == "as stated" {
				t.Errorf("read no Observation: %s", want)
			}
		})
	}
}
