package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of a process's start time in
// /proc/PID/stat. It is 100 on every Linux architecture Go runs on.
const clockTicks = 100

// procStat is what the harness reads from /proc/PID/stat.
type procStat struct {
	Comm  string
	State string
	PPID  int
	// Start is when the process started, in clock ticks since boot.
	Start uint64
}

// parseStat reads /proc/PID/stat. The command name may hold spaces and
// parentheses, so the fields after it are found from its last ')'.
func parseStat(data []byte) (procStat, error) {
	open, end := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
	if open < 0 || end < open {
		return procStat{}, errors.New("bench: malformed stat: no command name")
	}

	// After the name: state (field 3), ppid (4), ... starttime (22).
	f := strings.Fields(string(data[end+1:]))
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("bench: malformed stat: %d fields after the name", len(f))
	}

	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procStat{}, fmt.Errorf("bench: malformed stat: ppid: %w", err)
	}

	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("bench: malformed stat: starttime: %w", err)
	}

	return procStat{Comm: string(data[open+1 : end]), State: f[0], PPID: ppid, Start: start}, nil
}

// parseStatus reads VmRSS and VmHWM, in bytes, from /proc/PID/status.
func parseStatus(data []byte) (rss, hwm uint64, err error) {
	for line := range strings.SplitSeq(string(data), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}

		f := strings.Fields(value)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("bench: malformed status line %q", line)
		}

		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("bench: malformed status line %q: %w", line, err)
		}

		if key == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
	}

	if rss == 0 || hwm == 0 {
		return 0, 0, errors.New("bench: status lacks VmRSS or VmHWM (a kernel thread, or a zombie)")
	}

	return rss, hwm, nil
}

// parseUptime reads the seconds since boot from /proc/uptime.
func parseUptime(data []byte) (time.Duration, error) {
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0, errors.New("bench: empty uptime")
	}

	secs, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, fmt.Errorf("bench: malformed uptime: %w", err)
	}

	return time.Duration(secs * float64(time.Second)), nil
}

// startedAt turns a start in clock ticks since boot into wall time, given
// the uptime read at now. Both counts share the kernel's boot clock, so the
// result is good to a tick (10 ms).
func startedAt(startTicks uint64, uptime time.Duration, now time.Time) time.Time {
	sinceBoot := time.Duration(startTicks) * time.Second / clockTicks

	return now.Add(sinceBoot - uptime)
}

func procFile(pid int, name string) ([]byte, error) {
	return os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), name))
}

func readStat(pid int) (procStat, error) {
	data, err := procFile(pid, "stat")
	if err != nil {
		return procStat{}, err
	}

	return parseStat(data)
}

// readMemory reads VmRSS and VmHWM of pid.
func readMemory(pid int) (rss, hwm uint64, err error) {
	data, err := procFile(pid, "status")
	if err != nil {
		return 0, 0, err
	}

	return parseStatus(data)
}

// processStart is when pid started, in wall time.
func processStart(pid int) (time.Time, error) {
	st, err := readStat(pid)
	if err != nil {
		return time.Time{}, err
	}

	data, err := os.ReadFile("/proc/uptime")
	now := time.Now()

	if err != nil {
		return time.Time{}, err
	}

	up, err := parseUptime(data)
	if err != nil {
		return time.Time{}, err
	}

	return startedAt(st.Start, up, now), nil
}

// parseSchedstat reads how long a task has run on a CPU: the first field of
// /proc/PID/task/TID/schedstat, in nanoseconds.
func parseSchedstat(data []byte) (time.Duration, error) {
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0, errors.New("bench: empty schedstat")
	}

	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bench: malformed schedstat: %w", err)
	}

	return time.Duration(ns), nil
}

// cpuTime is the CPU time the threads of the processes have run so far,
// to the nanosecond (the tick-based counters of /proc/PID/stat are good to
// 10 ms only). A process or thread gone meanwhile counts as nothing.
func cpuTime(pids []int) time.Duration {
	var total time.Duration

	for _, pid := range pids {
		dir := filepath.Join("/proc", strconv.Itoa(pid), "task")

		tasks, err := os.ReadDir(dir)
		if err != nil {
			continue
		}

		for _, t := range tasks {
			if data, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat")); err == nil {
				ran, _ := parseSchedstat(data) //nolint:errcheck // a malformed line counts as nothing
				total += ran
			}
		}
	}

	return total
}

// childrenOf returns the live children of ppid by command name.
func childrenOf(ppid int) (map[string]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}

	out := map[string]int{}

	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}

		st, err := readStat(pid)
		if err != nil || st.PPID != ppid || st.State == "Z" {
			continue // gone meanwhile, someone else's, or a zombie
		}

		out[st.Comm] = pid
	}

	return out, nil
}
