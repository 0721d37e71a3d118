package scale

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

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat:
// 100 on every Linux architecture Go runs on.
const clockTicks = 100

// parseCPU reads utime+stime from /proc/PID/stat. The command name may hold
// spaces and parentheses, so the fields are counted from its last ')'.
func parseCPU(data []byte) (time.Duration, error) {
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return 0, errors.New("scale: malformed stat: no command name")
	}

	// After the name: state is field 3, utime 14, stime 15.
	f := strings.Fields(string(data[end+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("scale: malformed stat: %d fields after the name", len(f))
	}

	var ticks uint64

	for _, s := range f[11:13] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("scale: malformed stat: %w", err)
		}

		ticks += v
	}

	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// cpuOf is a process's CPU time so far; zero when it is gone.
func cpuOf(pid int) time.Duration {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}

	d, _ := parseCPU(data) //nolint:errcheck // a malformed stat counts as none

	return d
}

// parseRSS reads VmRSS, in bytes, from /proc/PID/status.
func parseRSS(data []byte) (uint64, error) {
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("scale: malformed VmRSS line %q", line)
			}

			kb, err := strconv.ParseUint(f[0], 10, 64)

			return kb << 10, err
		}
	}

	return 0, errors.New("scale: no VmRSS in status")
}

func rssOf(pid int) uint64 {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}

	v, _ := parseRSS(data) //nolint:errcheck // unreadable counts as none

	return v
}

// socketsOf counts a process's open sockets: its connections and its
// listeners.
func socketsOf(pid int) int {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")

	fds, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}

	n := 0

	for _, fd := range fds {
		if t, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && strings.HasPrefix(t, "socket:") {
			n++
		}
	}

	return n
}

// commOf is a process's command name; empty when it is gone.
func commOf(pid int) string {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	if err != nil {
		return ""
	}

	return strings.TrimSpace(string(data))
}
