package bench

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// DescribeMachine reads what the report says about the machine. Anything
// unreadable is left empty: a description is no reason to fail a run.
func DescribeMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), LoadBefore: LoadAverage()}

	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPU = fieldOf(data, "model name", ':')
	}

	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		if f := strings.Fields(fieldOf(data, "MemTotal", ':')); len(f) > 0 {
			kb, _ := strconv.ParseUint(f[0], 10, 64)
			m.MemoryMiB = kb >> 10
		}
	}

	if data, err := os.ReadFile("/etc/os-release"); err == nil {
		m.OS = strings.Trim(fieldOf(data, "PRETTY_NAME", '='), `"`)
	}

	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}

	return m
}

// LoadAverage is the 1-minute load average.
func LoadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}

	if f := strings.Fields(string(data)); len(f) > 0 {
		return f[0]
	}

	return ""
}

// fieldOf returns the value of the first "key<sep>value" line of data.
func fieldOf(data []byte, key string, sep byte) string {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), string(sep))
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}

	return ""
}
