package main

import (
	"runtime/metrics"
	"time"
)

// Runtime counters sampled around each measured slice, so that a run can
// say, per server, how many bytes the process allocated and how much CPU
// the collector's idle-priority mark workers used per read served. Both
// servers, their clients and the collector share one process: the counters
// are the process's, as processCPU is, and only their difference between
// the two servers' slices says something about either server.
const (
	sampleAllocs = "/gc/heap/allocs:bytes"                 // cumulative bytes allocated on the heap
	sampleGCIdle = "/cpu/classes/gc/mark/idle:cpu-seconds" // CPU of the idle-priority mark workers (CPU that was idle)
)

// runtimeSample is one reading of the samples above.
type runtimeSample struct {
	allocBytes uint64
	gcIdle     time.Duration
}

// readRuntime reads the counters; an unsupported one reads as zero. Each
// field is read by its sample's name, not by position (a positional read
// once reported the collector's total CPU as its idle marking).
func readRuntime() runtimeSample {
	s := []metrics.Sample{{Name: sampleAllocs}, {Name: sampleGCIdle}}
	metrics.Read(s)
	var r runtimeSample
	for _, x := range s {
		switch x.Name {
		case sampleAllocs:
			if x.Value.Kind() == metrics.KindUint64 {
				r.allocBytes = x.Value.Uint64()
			}
		case sampleGCIdle:
			if x.Value.Kind() == metrics.KindFloat64 {
				r.gcIdle = time.Duration(x.Value.Float64() * float64(time.Second))
			}
		}
	}
	return r
}

// sub is the difference r − o, counter by counter.
func (r runtimeSample) sub(o runtimeSample) runtimeSample {
	return runtimeSample{allocBytes: r.allocBytes - o.allocBytes, gcIdle: r.gcIdle - o.gcIdle}
}

// add is r + o, counter by counter.
func (r runtimeSample) add(o runtimeSample) runtimeSample {
	return runtimeSample{allocBytes: r.allocBytes + o.allocBytes, gcIdle: r.gcIdle + o.gcIdle}
}
