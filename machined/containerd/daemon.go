// Package containerd runs a node's own containerd: its configuration, root,
// state and socket under the node's state directory, so that several nodes
// on one machine never share one, and the import of the system images into
// it from the archives the build made.
package containerd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/client"

	"github.com/aegis-os/aegis/internal/atomicfile"
)

// Namespace is the containerd namespace of the system services.
const Namespace = "system"

// Config configures a Daemon. Dir is required.
type Config struct {
	// Dir holds containerd's config, root and state (the node's
	// containerd directory).
	Dir string
	// Binary is containerd's executable; empty means "containerd" on PATH.
	Binary string
	// ShortSocketDir is where the socket goes when Dir is too long for a
	// Unix socket name; empty means /run/aegis.
	ShortSocketDir string
}

// Daemon is a node's containerd: what runs it and a client of it.
type Daemon struct {
	cfg    Config
	socket string
	client *client.Client

	// importing makes imports one at a time (see importArchive).
	importing sync.Mutex
}

// New prepares a node's containerd: the paths, not the process.
func New(cfg Config) (*Daemon, error) {
	if cfg.Dir == "" {
		return nil, errors.New("containerd: config needs the directory")
	}

	if cfg.Binary == "" {
		cfg.Binary = "containerd"
	}

	if cfg.ShortSocketDir == "" {
		cfg.ShortSocketDir = "/run/aegis"
	}

	d := &Daemon{cfg: cfg, socket: socketPath(cfg.Dir, cfg.ShortSocketDir)}

	c, err := client.New(d.socket, client.WithDefaultNamespace(Namespace), client.WithTimeout(clientReconnect))
	if err != nil {
		return nil, fmt.Errorf("containerd: %w", err)
	}

	d.client = c

	return d, nil
}

// socketPath is containerd's socket under dir, or, when that name (with the
// ".ttrpc" containerd adds for its second socket) is too long for a Unix
// socket, a name in shortDir derived from dir: the same node always gets
// the same socket, two nodes never share one.
func socketPath(dir, shortDir string) string {
	p := filepath.Join(dir, "containerd.sock")
	if len(p)+len(".ttrpc") < maxSocketName {
		return p
	}

	sum := sha256.Sum256([]byte(dir))

	return filepath.Join(shortDir, "ctrd-"+hex.EncodeToString(sum[:8])+".sock")
}

// Socket is containerd's gRPC socket.
func (d *Daemon) Socket() string { return d.socket }

// Client is the node's client of its containerd. It reconnects by itself
// after containerd restarts.
func (d *Daemon) Client() *client.Client { return d.client }

// Close closes the client.
func (d *Daemon) Close() error { return d.client.Close() }

// RuncRoot is where runc keeps the state of this node's containers: runc's
// default is shared by every containerd on the machine.
func (d *Daemon) RuncRoot() string { return filepath.Join(d.cfg.Dir, "runc") }

// FIFODir holds the pipes of the containers' stdout and stderr.
func (d *Daemon) FIFODir() string { return filepath.Join(d.cfg.Dir, "fifo") }

// Prepare writes containerd's config and makes its directories.
func (d *Daemon) Prepare() error {
	for _, dir := range []string{d.cfg.Dir, d.RuncRoot(), d.FIFODir(), filepath.Dir(d.socket)} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("containerd: %w", err)
		}
	}

	err := atomicfile.Write(d.configPath(), []byte(d.config()), 0o600, atomicfile.Options{Overwrite: true})
	if err != nil {
		return fmt.Errorf("containerd: %w", err)
	}

	return nil
}

func (d *Daemon) configPath() string { return filepath.Join(d.cfg.Dir, "config.toml") }

// config is containerd's config: everything under Dir, only the gRPC
// socket, and the plugins a node does not use disabled (the CRI for
// Kubernetes, the snapshotters of other file systems, the opt plugin that
// would write to /opt).
func (d *Daemon) config() string {
	q := func(s string) string { return fmt.Sprintf("%q", s) }

	return strings.Join([]string{
		"version = 2",
		"root = " + q(filepath.Join(d.cfg.Dir, "root")),
		"state = " + q(filepath.Join(d.cfg.Dir, "state")),
		"disabled_plugins = [" + strings.Join(disabledPlugins, ", ") + "]",
		"",
		"[grpc]",
		"  address = " + q(d.socket),
		"[ttrpc]",
		`  address = ""`,
		"[debug]",
		`  address = ""`,
		"[metrics]",
		`  address = ""`,
		"",
	}, "\n")
}

var disabledPlugins = []string{
	`"io.containerd.grpc.v1.cri"`, `"io.containerd.internal.v1.opt"`, `"io.containerd.snapshotter.v1.btrfs"`,
	`"io.containerd.snapshotter.v1.aufs"`, `"io.containerd.snapshotter.v1.zfs"`, `"io.containerd.snapshotter.v1.devmapper"`,
	`"io.containerd.tracing.processor.v1.otlp"`, `"io.containerd.internal.v1.tracing"`,
}

// Command is containerd's command line, for a process runner.
func (d *Daemon) Command() (path string, args []string) {
	return d.cfg.Binary, []string{"--config", d.configPath()}
}

// Env is containerd's environment: PATH, to find the shim and runc.
func Env() []string {
	return []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
}

// Serving reports whether containerd answers, waiting for it up to ctx.
func (d *Daemon) Serving(ctx context.Context) error {
	ok, err := d.client.IsServing(ctx)
	if err != nil {
		return fmt.Errorf("containerd: %w", err)
	}

	if !ok {
		return errors.New("containerd: not serving")
	}

	return nil
}

// clientReconnect caps the wait between the client's attempts to reach a
// restarted containerd: a service's runner waits on that connection.
const clientReconnect = time.Second
