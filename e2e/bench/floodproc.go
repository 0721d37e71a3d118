package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/aegis-os/aegis/e2e/flood"
)

// The flood of many sources runs in a process of its own: the harness's
// binary again, told so by floodChildEnv, under nice. In the harness's
// process its thousands of goroutines took the CPU from the joins and
// calls being timed, and an attacker's CPU is not the servers' to share
// anyway; niced, it takes what the servers and the timed clients leave.
const (
	floodChildEnv = "AEGISBENCH_FLOOD"
	floodNice     = "10"
	// floodReport is how often the flood process writes its open
	// connections per target.
	floodReport = 200 * time.Millisecond
	// floodStopTimeout bounds the flood process's own stop.
	floodStopTimeout = 30 * time.Second
)

// floodSpec is the flood a flood process makes: from each of Sources
// sources (floodSource), an idle TLS, a silent and a half-ClientHello
// connection to each of Targets, made again Redial after the server closed
// it. The idle ones verify nothing and present no certificate, as an
// attacker's.
type floodSpec struct {
	Targets []string      `json:"targets"`
	Sources int           `json:"sources"`
	Redial  time.Duration `json:"redial"`
}

// FloodChild runs the flood that a harness asked for in the environment,
// if it asked, until its standard input closes, and reports whether it
// did: aegisbench's main calls it first and exits when it returns true.
func FloodChild() bool {
	v := os.Getenv(floodChildEnv)
	if v == "" {
		return false
	}

	var spec floodSpec
	if err := json.Unmarshal([]byte(v), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "aegisbench flood:", err)
		os.Exit(2)
	}

	runFlood(spec, os.Stdin, os.Stdout)

	return true
}

// runFlood floods as spec says until stop ends, writing the open
// connections per target to out as a JSON array every floodReport.
func runFlood(spec floodSpec, stop io.Reader, out io.Writer) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	go func() {
		_, _ = io.Copy(io.Discard, stop)
		cancel()
	}()

	//nolint:gosec // an attacker's client: it verifies nothing
	cfg := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}
	floods := make([][]*flood.Flood, len(spec.Targets))

	for i, target := range spec.Targets {
		for src := range spec.Sources {
			floods[i] = append(floods[i], flood.Start(ctx, flood.Config{
				Target: target, Source: floodSource(src), TLS: cfg,
				Idle: 1, Silent: 1, HalfHello: 1, Redial: spec.Redial,
			}))
		}
	}

	tick := time.NewTicker(floodReport)
	defer tick.Stop()

	enc := json.NewEncoder(out)

	for {
		select {
		case <-ctx.Done():
			for _, fs := range floods {
				stopAll(fs)
			}

			return
		case <-tick.C:
			open := make([]int64, len(floods))
			for i, fs := range floods {
				open[i] = openOf(fs)
			}

			_ = enc.Encode(open)
		}
	}
}

// floodProcess is a running flood process, seen from the harness.
type floodProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	read  chan struct{} // closed when its output ends

	mu  sync.Mutex
	max []int64 // the most open connections per target so far
}

// startFlood starts a flood process for spec.
func startFlood(spec floodSpec) (*floodProcess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}

	env, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}

	cmd := exec.Command(exe)
	if nice, lerr := exec.LookPath("nice"); lerr == nil {
		cmd = exec.Command(nice, "-n", floodNice, exe)
	}

	cmd.Env = append(os.Environ(), floodChildEnv+"="+string(env))
	cmd.Stderr = os.Stderr

	p := &floodProcess{cmd: cmd, read: make(chan struct{}), max: make([]int64, len(spec.Targets))}

	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}

	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}

	if err = cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: starting the flood process: %w", err)
	}

	go p.follow(stdout)

	return p, nil
}

// follow reads the flood process's reports.
func (p *floodProcess) follow(r io.Reader) {
	defer close(p.read)

	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var open []int64
		if json.Unmarshal(sc.Bytes(), &open) != nil || len(open) != len(p.max) {
			continue
		}

		p.mu.Lock()
		for i, n := range open {
			p.max[i] = max(p.max[i], n)
		}
		p.mu.Unlock()
	}
}

// held returns the most open connections per target so far.
func (p *floodProcess) held() []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()

	return append([]int64(nil), p.max...)
}

// stop ends the flood and waits for the process, killing it if it does
// not end within floodStopTimeout.
func (p *floodProcess) stop() error {
	_ = p.stdin.Close()

	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()

	select {
	case err := <-done:
		return err
	case <-time.After(floodStopTimeout):
		_ = p.cmd.Process.Kill()

		return errors.Join(errors.New("bench: the flood process did not stop; killed"), <-done)
	}
}
