package worker

import (
	"runtime"
	"sync"
	"time"
)

// CPUSampler measures the process's CPU use for the CPU guard
// (Config.CPULimit). A pool calls it from one goroutine, every
// Config.CPUInterval.
type CPUSampler interface {
	// CPUUsage returns the share of the CPU the process used since the
	// previous call (since the sampler was made, on the first): its CPU
	// time (user + system) over the wall time times GOMAXPROCS, so 1 means
	// every core the process may use was busy. It may exceed 1 briefly
	// (threads outside GOMAXPROCS, cgo, the garbage collector).
	CPUUsage() float64
}

// ProcessCPU returns a CPUSampler that reads the process's CPU time from
// the operating system (getrusage on Unix systems). Where the system gives
// no reading it always answers 0, and the CPU guard never pauses.
func ProcessCPU() CPUSampler {
	s := &processCPU{now: time.Now}
	s.lastCPU, _ = processCPUTime()
	s.lastWall = s.now()
	return s
}

type processCPU struct {
	mu       sync.Mutex
	now      func() time.Time
	lastCPU  time.Duration
	lastWall time.Time
}

func (s *processCPU) CPUUsage() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	cpu, ok := processCPUTime()
	if !ok {
		return 0
	}
	wall := s.now()
	dc, dw := cpu-s.lastCPU, wall.Sub(s.lastWall)
	s.lastCPU, s.lastWall = cpu, wall
	if dw <= 0 {
		return 0
	}
	return float64(dc) / (float64(dw) * float64(runtime.GOMAXPROCS(0)))
}
