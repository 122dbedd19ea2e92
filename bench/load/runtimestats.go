package main

import (
	"runtime/metrics"
	"time"
)

// Runtime counters sampled around each measured slice, so that a run can
// say, per server, how many bytes the process allocated and how much CPU
// the garbage collector used per read served. Both servers, their clients
// and the collector share one process: the counters are the process's, as
// processCPU is, and only their difference between the two servers' slices
// says something about either server.
var runtimeSampleNames = []string{
	"/gc/heap/allocs:bytes",                 // cumulative bytes allocated on the heap
	"/cpu/classes/gc/mark/idle:cpu-seconds", // CPU of the idle-priority mark workers (CPU that was idle)
}

// runtimeSample is one reading of runtimeSampleNames.
type runtimeSample struct {
	allocBytes uint64
	gcIdle     time.Duration
}

// readRuntime reads the counters; an unsupported one reads as zero.
func readRuntime() runtimeSample {
	s := make([]metrics.Sample, len(runtimeSampleNames))
	for i, n := range runtimeSampleNames {
		s[i].Name = n
	}
	metrics.Read(s)
	secs := func(v metrics.Value) time.Duration {
		if v.Kind() != metrics.KindFloat64 {
			return 0
		}
		return time.Duration(v.Float64() * float64(time.Second))
	}
	var r runtimeSample
	if s[0].Value.Kind() == metrics.KindUint64 {
		r.allocBytes = s[0].Value.Uint64()
	}
	r.gcIdle = secs(s[1].Value) // the idle mark workers' (TestReadRuntimeReadsIdleMarking)
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
