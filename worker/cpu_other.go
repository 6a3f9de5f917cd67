//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package worker

import "time"

// processCPUTime has no reading on this system: ProcessCPU answers 0.
func processCPUTime() (time.Duration, bool) { return 0, false }
