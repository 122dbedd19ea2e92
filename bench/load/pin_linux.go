//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// cpuSplit is the machine's CPUs split between the server side (custos
// and the clinician, which run in this process) and the flood process:
// the first allowed CPU for the server, the others for the flood. ok is
// false with fewer than two CPUs: then nothing is pinned.
func cpuSplit() (server, flood []int, ok bool) {
	cpus := allowedCPUs()
	if len(cpus) < 2 {
		return nil, nil, false
	}
	return cpus[:1], cpus[1:], true
}

// allowedCPUs are the CPUs the calling thread may run on (nil if unknown).
func allowedCPUs() []int {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return nil
	}
	var cpus []int
	for c := range 8 * 128 { // CPUSet holds 1024 CPUs
		if all.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

func cpuSet(cpus []int) *unix.CPUSet {
	var s unix.CPUSet
	for _, c := range cpus {
		s.Set(c)
	}
	return &s
}

// pinProcess pins every thread of this process to cpus (threads started
// later inherit the mask of the thread that starts them) and sets
// GOMAXPROCS to their number. The returned function restores the mask
// and GOMAXPROCS.
func pinProcess(cpus []int) (restore func(), err error) {
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return nil, err
	}
	procs := runtime.GOMAXPROCS(0)
	setAll := func(s *unix.CPUSet) error {
		// Twice: a thread started during the first pass from a thread not
		// yet pinned inherits the old mask.
		for range 2 {
			tasks, err := os.ReadDir("/proc/self/task")
			if err != nil {
				return err
			}
			for _, t := range tasks {
				tid, err := strconv.Atoi(t.Name())
				if err != nil {
					continue
				}
				if err := unix.SchedSetaffinity(tid, s); err != nil && err != unix.ESRCH {
					return fmt.Errorf("pinning thread %d: %w", tid, err)
				}
			}
		}
		return nil
	}
	if err := setAll(cpuSet(cpus)); err != nil {
		setAll(&old)
		return nil, err
	}
	runtime.GOMAXPROCS(len(cpus))
	return func() {
		setAll(&old)
		runtime.GOMAXPROCS(procs)
	}, nil
}

// startPinned starts cmd with its CPU affinity set to cpus: the thread
// that forks is pinned for the moment of the fork, and the child (every
// thread it will have, and its GOMAXPROCS default) inherits the mask.
func startPinned(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) == 0 {
		return cmd.Start()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return err
	}
	if err := unix.SchedSetaffinity(0, cpuSet(cpus)); err != nil {
		return err
	}
	err := cmd.Start()
	if rerr := unix.SchedSetaffinity(0, &old); rerr != nil && err == nil {
		err = rerr
	}
	return err
}
