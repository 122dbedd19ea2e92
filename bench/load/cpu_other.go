//go:build !unix

package main

import "time"

// processCPU is not measured on this platform: the report shows no CPU
// per read.
func processCPU() time.Duration { return 0 }
