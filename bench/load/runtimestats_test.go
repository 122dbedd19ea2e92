package main

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func readSeconds(t *testing.T, name string) time.Duration {
	t.Helper()
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 {
		t.Fatalf("%s: unsupported by this runtime", name)
	}
	return time.Duration(s[0].Value.Float64() * float64(time.Second))
}

// readRuntime's GC figure is the idle-priority mark workers' CPU, not the
// collector's total: read between two direct readings of the idle counter,
// after a forced collection made the total larger than it.
func TestReadRuntimeReadsIdleMarking(t *testing.T) {
	var sink [][]byte
	for range 1000 {
		sink = append(sink, make([]byte, 4096))
	}
	runtime.KeepAlive(sink)
	runtime.GC()
	idle0 := readSeconds(t, "/cpu/classes/gc/mark/idle:cpu-seconds")
	r := readRuntime()
	idle1 := readSeconds(t, "/cpu/classes/gc/mark/idle:cpu-seconds")
	total := readSeconds(t, "/cpu/classes/gc/total:cpu-seconds")
	if total <= idle1 {
		t.Fatalf("GC total %v not above idle marking %v after a forced collection: the test cannot tell them apart", total, idle1)
	}
	if r.gcIdle < idle0 || r.gcIdle > idle1 {
		t.Fatalf("readRuntime's GC CPU %v outside the idle marking counter's readings [%v, %v] (the GC total is %v)", r.gcIdle, idle0, idle1, total)
	}
	if r.allocBytes == 0 {
		t.Fatal("readRuntime read no allocated bytes")
	}
}
