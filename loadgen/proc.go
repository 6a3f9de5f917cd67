package loadgen

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Broker processes are measured from /proc (Linux): a process's CPU time
// is utime+stime+cutime+cstime of the process and every descendant alive at
// the time of the reading. Counting the reaped children's time (cutime,
// cstime) and the descendants' makes a multi-process server such as
// PostgreSQL measurable from its postmaster's pid: backends that start and
// exit during the run are counted through the postmaster's cutime/cstime.
// /proc reports clock ticks of USER_HZ, which is 100 on Linux.
const userHZ = 100

// procCPU is the CPU time of the roots and their descendants.
func procCPU(roots []int) (time.Duration, error) {
	stats, err := allStats()
	if err != nil {
		return 0, err
	}
	children := map[int][]int{}
	for pid, s := range stats {
		children[s.ppid] = append(children[s.ppid], pid)
	}
	var ticks int64
	seen := map[int]bool{}
	var walk func(pid int)
	walk = func(pid int) {
		if seen[pid] {
			return
		}
		seen[pid] = true
		if s, ok := stats[pid]; ok {
			ticks += s.ticks
		}
		for _, c := range children[pid] {
			walk(c)
		}
	}
	for _, r := range roots {
		if _, ok := stats[r]; !ok {
			return 0, fmt.Errorf("loadgen: no process %d", r)
		}
		walk(r)
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

type procStat struct {
	ppid  int
	ticks int64
}

func allStats() (map[int]procStat, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := make(map[int]procStat, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, err := readStat(pid); err == nil {
			out[pid] = s
		}
	}
	return out, nil
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("loadgen: /proc/%d/stat: no comm", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state): ppid is field 4, utime..cstime fields 14..17.
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("loadgen: /proc/%d/stat: short", pid)
	}
	ppid, _ := strconv.Atoi(f[1])
	var t int64
	for _, k := range f[11:15] {
		v, _ := strconv.ParseInt(k, 10, 64)
		t += v
	}
	return procStat{ppid: ppid, ticks: t}, nil
}

// peakRSS is the sum of VmHWM (peak resident set) of the roots, in bytes.
func peakRSS(roots []int) (int64, error) {
	var total int64
	for _, pid := range roots {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
				total += kb * 1024
			}
		}
	}
	return total, nil
}

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ParsePIDs parses a comma-separated pid list ("" is none).
func ParsePIDs(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := strconv.Atoi(f)
		if err != nil || p <= 0 {
			return nil, fmt.Errorf("--pid: %q is not a process id", f)
		}
		out = append(out, p)
	}
	return out, nil
}
