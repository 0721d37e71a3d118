package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
)

const (
	// DefaultGracePeriod is how long a process has between SIGTERM and SIGKILL.
	DefaultGracePeriod = 10 * time.Second
	// outputDrainDelay bounds the wait for output still in the pipe after a
	// process exited.
	outputDrainDelay = time.Second
)

// ProcessConfig describes a process to run. Path is required.
type ProcessConfig struct {
	// Path of the executable and its arguments (without argv[0]).
	Path string
	Args []string
	// Env is the whole environment of the process; nil means an empty one,
	// so nothing of machined's environment leaks in by accident.
	Env []string
	// Dir is the working directory; empty means machined's.
	Dir string
	// Log receives stdout and stderr. Nil discards them.
	Log io.Writer
	// GracePeriod between SIGTERM and SIGKILL; zero means DefaultGracePeriod.
	GracePeriod time.Duration
	// Clock times the grace period. Nil means the system clock.
	Clock clock.Clock
	// Nice, zero or negative, is added to machined's own nice value for
	// the process and every thread it starts: it runs ahead of the node's
	// other processes when they want more CPU than there is. Going below
	// machined's own value needs CAP_SYS_NICE; without it, the process
	// runs at machined's value and its start event says why. Zero keeps
	// machined's; a positive value fails the start.
	Nice int
	// Files are given to the process at each start as the descriptors
	// 3, 4, … (a listening socket machined holds, say); machined's copies
	// are closed once the process has started. Nil gives none.
	Files []FileSource
}

// FileSource gives a new copy of a file at each call, such as
// (*net.TCPListener).File; the caller closes it.
type FileSource interface {
	File() (*os.File, error)
}

// Releaser is a FileSource told when the process it gave a file to has
// ended (inherit.Source: a held socket no process has refuses clients
// after a moment).
type Releaser interface {
	Release()
}

type process struct {
	cfg ProcessConfig
}

// Process returns a runner that runs an executable in its own process group,
// so a stop reaches every child it started, and that dies with machined.
func Process(cfg ProcessConfig) Runner {
	if cfg.GracePeriod == 0 {
		cfg.GracePeriod = DefaultGracePeriod
	}

	cfg.Clock = defaults.Clock(cfg.Clock)
	cfg.Log = defaults.Output(cfg.Log)

	if cfg.Env == nil {
		cfg.Env = []string{}
	}

	return &process{cfg: cfg}
}

func (p *process) String() string {
	return "process " + strings.Join(append([]string{p.cfg.Path}, p.cfg.Args...), " ")
}

func (p *process) Run(ctx context.Context, notify Notify) error {
	cmd := exec.Command(p.cfg.Path, p.cfg.Args...)
	cmd.Env, cmd.Dir = p.cfg.Env, p.cfg.Dir
	cmd.Stdout, cmd.Stderr = p.cfg.Log, p.cfg.Log
	// Setpgid: signals go to the whole group. Pdeathsig: if machined dies,
	// the kernel kills the child rather than leave it running unsupervised.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// A child left behind may hold the output pipe open; do not wait on it
	// for long once the process itself has exited.
	cmd.WaitDelay = outputDrainDelay

	files, err := openFiles(p.cfg.Files)
	if err != nil {
		return fmt.Errorf("runner: starting %s: %w", p.cfg.Path, err)
	}
	defer releaseFiles(p.cfg.Files)

	cmd.ExtraFiles = files
	refused, err := startNiced(cmd, p.cfg.Nice)

	closeFiles(files)

	if err != nil {
		return fmt.Errorf("runner: starting %s: %w", p.cfg.Path, err)
	}

	done := make(chan error, 1)

	go func() { done <- cmd.Wait() }()

	started := fmt.Sprintf("process %d started", cmd.Process.Pid)
	if refused != nil {
		started += fmt.Sprintf(" at machined's priority (%v)", refused)
	}

	notify(true, started)

	select {
	case err := <-done:
		// The process is gone; anything it left in its group goes too.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // usually nothing is left

		// ErrWaitDelay: the process exited well, a child of it held the pipe.
		if err != nil && !errors.Is(err, exec.ErrWaitDelay) {
			return fmt.Errorf("runner: %s: %w", p.cfg.Path, err)
		}

		return nil
	case <-ctx.Done():
		return p.stop(cmd.Process.Pid, done)
	}
}

// openFiles opens a copy of each source, in order. On an error, the
// sources opened are released again.
func openFiles(sources []FileSource) ([]*os.File, error) {
	files := make([]*os.File, 0, len(sources))

	for i, src := range sources {
		f, err := src.File()
		if err != nil {
			closeFiles(files)
			releaseFiles(sources[:i])

			return nil, err
		}

		files = append(files, f)
	}

	return files, nil
}

// releaseFiles tells each source that is a Releaser that the process it
// gave a file to has ended.
func releaseFiles(sources []FileSource) {
	for _, src := range sources {
		if r, ok := src.(Releaser); ok {
			r.Release()
		}
	}
}

// closeFiles closes machined's copies of files a process was given.
func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close() //nolint:errcheck // a copy; the process holds its own
	}
}

// stop sends SIGTERM to the process group and SIGKILL after the grace period.
func (p *process) stop(pid int, done <-chan error) error {
	_ = syscall.Kill(-pid, syscall.SIGTERM) //nolint:errcheck // the group may already be gone

	grace := p.cfg.Clock.NewTimer(p.cfg.GracePeriod)
	defer grace.Stop()

	select {
	case <-done:
		return nil
	case <-grace.C():
	}

	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("runner: killing %s: %w", p.cfg.Path, err)
	}

	<-done

	return nil
}
