package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// syntheticEntries streams n FHIR entries of ten patients' worth of types
// (about 0.8 KB each, like Synthea's NDJSON lines), generated on the fly so
// the stream itself holds nothing: what an import holds is its own memory.
func syntheticEntries(n int) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		for i := range n {
			p := fmt.Sprintf("pat-%07d", i/20)
			var e Entry
			switch i % 20 {
			case 0:
				e = Entry{Type: "Patient", ID: p, Patient: p, Body: fmt.Appendf(nil,
					`{"resourceType":"Patient","id":%q,"meta":{"lastUpdated":"2026-11-01T10:00:00Z"},"identifier":[{"system":"http://hospital.example/mrn","value":"MRN%07d"}],"name":[{"family":"Family%d","given":["Given%d"]}],"gender":"female","birthDate":"1961-0%d-1%d","address":[{"line":["%d Main Street"],"city":"Springfield","state":"MA","postalCode":"01101"}],"telecom":[{"system":"phone","value":"555-01%02d"}]}`,
					p, i, i, i, i%9+1, i%10, i%999, i%100)}
			case 19:
				e = Entry{Type: "Attachment", ID: fmt.Sprintf("DocumentReference/doc-%d/content/0", i), Patient: p, MIMEType: "text/plain; charset=utf-8",
					Carrier: Carrier{Type: "DocumentReference", ID: fmt.Sprintf("doc-%d", i)},
					Body:    fmt.Appendf(nil, "Progress note %d. Patient seen for follow-up; vitals stable; continue current plan. %s", i, strings.Repeat("Assessment and plan text. ", 20))}
			default:
				e = Entry{Type: "Observation", ID: fmt.Sprintf("obs-%d", i), Patient: p, LastUpdated: time.Date(2026, 11, 1, 10, 0, i%60, 0, time.UTC), Body: fmt.Appendf(nil,
					`{"resourceType":"Observation","id":"obs-%d","status":"final","category":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/observation-category","code":"vital-signs","display":"Vital Signs"}]}],"code":{"coding":[{"system":"http://loinc.org","code":"8867-4","display":"Heart rate"}],"text":"Heart rate"},"subject":{"reference":"Patient/%s"},"effectiveDateTime":"2026-10-%02dT08:%02d:00Z","valueQuantity":{"value":%d,"unit":"/min","system":"http://unitsofmeasure.org","code":"/min"},"interpretation":[{"coding":[{"code":"N"}]}]}`,
					i, p, i%28+1, i%60, 50+i%60)}
			}
			e.Where = "bench.ndjson:" + strconv.Itoa(i+1)
			if !yield(e, nil) {
				return
			}
		}
	}
}

// importScaleChild is the environment variable that makes TestImportScale's
// child process run one import of that many entries and print its figures.
const importScaleChild = "CUSTOS_STORE_IMPORT_CHILD"

// TestImportScale measures the staged streaming import at the issue's
// scale, in a child process of its own so that its peak RSS (VmHWM) is the
// import's alone: 100,000 entries, plaintext. Targets (docs/benchmarks.md):
// >= 5,000 resources/s and < 200 MB peak RSS. It runs only with
// CUSTOS_STORE_IMPORT_SCALE=N (N entries; "1" means 100,000), as it takes
// tens of seconds and most of a core.
func TestImportScale(t *testing.T) {
	if n := os.Getenv(importScaleChild); n != "" {
		importScaleInChild(t, n)
		return
	}
	// Without CUSTOS_STORE_IMPORT_SCALE a small run (2,000 entries) checks
	// the harness and the child's figures in every test run; =1 is the
	// 100,000-entry measurement with its targets, =N any other size.
	v := os.Getenv("CUSTOS_STORE_IMPORT_SCALE")
	n := 100_000
	switch v {
	case "":
		n = 2_000
	case "1":
	default:
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 20 {
			t.Fatalf("CUSTOS_STORE_IMPORT_SCALE=%q: want 1 or a count >= 20", v)
		}
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestImportScale$", "-test.v")
	cmd.Env = append(os.Environ(), importScaleChild+"="+strconv.Itoa(n), "CUSTOS_STORE_IMPORT_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	figures := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "import-scale:"); ok {
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				f, _ := strconv.ParseFloat(v, 64)
				figures[k] = f
			}
		}
	}
	if figures["entries"] != float64(n) {
		t.Fatalf("child printed no figures:\n%s", out)
	}
	t.Logf("%d entries (%.1f MB of content): %.0f resources/s (%.1f s of CPU: %.0f resources per CPU second), peak RSS %.1f MB (before import %.1f MB; sampled peaks: heap %.1f MB, mapped file %.1f MB), catalog %.1f MB, %.1f s",
		n, figures["bytes_mb"], figures["per_s"], figures["cpu_s"], float64(n)/figures["cpu_s"], figures["hwm_mb"], figures["start_mb"], figures["anon_mb"], figures["mapped_mb"], figures["file_mb"], figures["seconds"])
	if n >= 100_000 {
		if figures["per_s"] < 5000 {
			t.Errorf("throughput %.0f resources/s, target >= 5,000", figures["per_s"])
		}
		if figures["hwm_mb"] >= 200 {
			t.Errorf("peak RSS %.1f MB, target < 200 MB", figures["hwm_mb"])
		}
	}
}

func importScaleInChild(t *testing.T, count string) {
	n, err := strconv.Atoi(count)
	if err != nil {
		t.Fatal(err)
	}
	start := vmKB(t, "VmHWM")
	path := filepath.Join(os.Getenv("CUSTOS_STORE_IMPORT_DIR"), "catalog.db")
	namer, err := NewNamer("general-hospital", testIDKey, "bench:id-key@1")
	if err != nil {
		t.Fatal(err)
	}
	// Sample the anonymous (heap) and file-backed (bbolt's mapping) parts
	// of the resident set while the import runs.
	// The sampler must not call t.Fatal (not the test's goroutine): it
	// keeps its first error for the test to report.
	var maxAnon, maxFile float64
	var sampleErr error
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			anon, err1 := readVMKB("RssAnon")
			file, err2 := readVMKB("RssFile")
			if err := errors.Join(err1, err2); err != nil {
				sampleErr = err
				return
			}
			maxAnon, maxFile = max(maxAnon, anon), max(maxFile, file)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	cpu0 := cpuSeconds()
	t0 := time.Now()
	rep, err := ImportEntriesStaged(context.Background(), path, syntheticEntries(n), EntryOptions{Namer: namer}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	secs := time.Since(t0).Seconds()
	cpu := cpuSeconds() - cpu0
	close(stop)
	<-sampled
	if sampleErr != nil {
		t.Fatalf("sampling the resident set: %v", sampleErr)
	}
	if rep.Created != n {
		t.Fatalf("report %+v", rep)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("import-scale: entries=%d seconds=%.2f per_s=%.0f hwm_mb=%.1f start_mb=%.1f file_mb=%.1f bytes_mb=%.1f anon_mb=%.1f mapped_mb=%.1f cpu_s=%.2f\n",
		n, secs, float64(n)/secs, vmKB(t, "VmHWM")/1024, start/1024, float64(fi.Size())/(1<<20), float64(rep.Bytes)/(1<<20), maxAnon/1024, maxFile/1024, cpu)
}

// cpuSeconds is the process's user and system CPU time so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// vmKB reads a kB field of /proc/self/status, on the test's goroutine.
func vmKB(t *testing.T, field string) float64 {
	v, err := readVMKB(field)
	if errors.Is(err, os.ErrNotExist) {
		t.Skip("no /proc/self/status")
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// readVMKB reads a kB field of /proc/self/status.
func readVMKB(field string) (float64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", field)
}

// BenchmarkImportEntriesStaged imports b.N synthetic entries in one staged
// streaming import (plaintext).
func BenchmarkImportEntriesStaged(b *testing.B) {
	namer, err := NewNamer("general-hospital", testIDKey, "bench:id-key@1")
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "catalog.db")
	b.ReportAllocs()
	b.ResetTimer()
	rep, err := ImportEntriesStaged(context.Background(), path, syntheticEntries(max(b.N, 20)), EntryOptions{Namer: namer}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(rep.Bytes / int64(max(b.N, 1)))
	b.ReportMetric(float64(max(b.N, 20))/b.Elapsed().Seconds(), "resources/s")
}
