//go:build !linux

package main

import "os/exec"

// cpuSplit: CPUs are not pinned on this platform.
func cpuSplit() (server, flood []int, ok bool) { return nil, nil, false }

// allowedCPUs is not known on this platform.
func allowedCPUs() []int { return nil }

func pinProcess([]int) (func(), error) { return func() {}, nil }

func startPinned(cmd *exec.Cmd, _ []int) error { return cmd.Start() }
