package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/e2e/talossuite"
	"github.com/aegis-os/aegis/internal/bundle"
	"github.com/aegis-os/aegis/internal/version"
	"github.com/aegis-os/aegis/machined/localcluster"
)

// createTimeout bounds the creation of a cluster with --create.
const createTimeout = 4 * time.Minute

// openCluster creates the cluster (--create) or loads it (--cluster) and
// returns the function to call when done: it destroys a created cluster
// and its folder, and leaves a given one alone.
func (o options) openCluster(ctx context.Context, stderr io.Writer) (*localcluster.Cluster, func(), error) {
	if !o.create {
		c, err := localcluster.Load(filepath.Dir(o.cluster), filepath.Base(o.cluster))
		if err != nil {
			return nil, nil, fmt.Errorf("--cluster: %w", err)
		}

		return c, func() {}, nil
	}

	cidr, err := netip.ParsePrefix(o.cidr)
	if err != nil {
		return nil, nil, fmt.Errorf("--cidr: %w", err)
	}

	binDir, err := filepath.Abs(o.binDir)
	if err != nil {
		return nil, nil, err
	}

	state, err := os.MkdirTemp("", "aegis-talos-suite-")
	if err != nil {
		return nil, nil, err
	}

	fmt.Fprintf(stderr, "creating a local cluster of %d control planes and %d workers in %s (%s, %s runtime)\n",
		o.controlPlanes, o.workers, state, cidr, o.runtime)

	c, err := localcluster.Create(ctx, localcluster.Options{
		Name: "talos-suite", ControlPlanes: o.controlPlanes, Workers: o.workers, CIDR: cidr,
		StateDir: state, BinDir: binDir, Timeout: createTimeout, Runtime: certs.Runtime(o.runtime),
	})
	if err != nil {
		os.RemoveAll(state) //nolint:errcheck // our own temporary folder

		return nil, nil, err
	}

	cleanup := func() {
		fmt.Fprintln(stderr, "destroying the cluster")

		if err := c.Destroy(); err != nil {
			fmt.Fprintln(stderr, "aegis-talos-suite: destroying the cluster:", err)
		}

		os.RemoveAll(state) //nolint:errcheck // our own temporary folder
	}

	return c, cleanup, nil
}

// runStages runs Talos's tests, then the talosctl commands (whose last
// ones reboot, reset and shut down nodes).
func (o options) runStages(ctx context.Context, stderr io.Writer, c *localcluster.Cluster, bins talossuite.Binaries,
	expect talossuite.Expectations, report *talossuite.Report,
) error {
	talosconfig, err := o.writeTalosconfig(c)
	if err != nil {
		return err
	}

	// Logs of an earlier run would read as this one's.
	if err := os.RemoveAll(filepath.Join(o.out, "logs")); err != nil {
		return err
	}

	tag, aegis, goVersion, err := aegisVersion(ctx, filepath.Join(o.binDir, "machined"))
	if err != nil {
		return err
	}

	if expect, err = o.filter(expect); err != nil {
		return err
	}

	nodes := clusterNodes(c)

	var progress io.Writer
	if o.verbose {
		progress = stderr
	}

	fmt.Fprintf(stderr, "running %d of Talos's tests on %s (Aegis %s, %s)\n", len(expect.Served()), nodes.Env(), tag, goVersion)

	report.Tests = talossuite.RunSuite(ctx, talossuite.SuiteOptions{
		Binary: bins.Integration, Talosconfig: talosconfig, Nodes: nodes, Version: tag, GoVersion: goVersion,
		Talosctl: bins.Talosctl, Expect: expect, LogDir: filepath.Join(o.out, "logs"), Progress: progress,
	})

	if o.skipTalosctl {
		return nil
	}

	guide, err := os.ReadFile(o.guide)
	if err != nil {
		return err
	}

	commands, err := talossuite.GuideCommands(guide)
	if err != nil {
		return err
	}

	fmt.Fprintf(stderr, "running talosctl for the %d commands of %s\n", len(commands), o.guide)

	tmp, err := os.MkdirTemp("", "aegis-talosctl-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	bundlePath, err := writeBundle(o.binDir, aegis, tmp)
	if err != nil {
		return err
	}

	report.Verbs = talossuite.RunTalosctl(ctx, talossuite.TalosctlOptions{
		Talosctl: bins.Talosctl, Talosconfig: talosconfig, Nodes: nodes, TempDir: tmp, Progress: progress,
		Bundle:       bundlePath,
		LogDir:       filepath.Join(o.out, "logs", "talosctl"),
		WorkerConfig: c.ConfigPath(workerNode(c)),
	}, commands)

	return nil
}

// writeBundle writes the release bundle of binDir, version v, into dir,
// for talosctl upgrade: the nodes run the same build, so the upgrade is to
// the version they run (the skew policy allows an equal version) and
// exercises the whole switch.
func writeBundle(binDir, v, dir string) (string, error) {
	abs, err := filepath.Abs(binDir)
	if err != nil {
		return "", err
	}

	path := filepath.Join(dir, "aegis.bundle")

	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}

	if _, err := bundle.Write(f, bundle.Source{BinDir: abs, Version: v, Plain: true}); err != nil {
		f.Close() //nolint:errcheck // the write's error is the one to report

		return "", fmt.Errorf("writing the bundle of %s for talosctl upgrade: %w", abs, err)
	}

	return path, f.Close()
}

// writeTalosconfig copies the cluster's admin client config, which is a
// talosconfig, to the output folder (0600: it holds the admin key).
func (o options) writeTalosconfig(c *localcluster.Cluster) (string, error) {
	data, err := os.ReadFile(c.ClientConfigPath())
	if err != nil {
		return "", err
	}

	path, err := filepath.Abs(filepath.Join(o.out, "talosconfig"))
	if err != nil {
		return "", err
	}

	return path, os.WriteFile(path, data, 0o600)
}

func clusterNodes(c *localcluster.Cluster) talossuite.Nodes {
	var n talossuite.Nodes

	for _, node := range c.Nodes {
		if node.Type.IsControlPlane() {
			n.ControlPlanes = append(n.ControlPlanes, node.Address)
		} else {
			n.Workers = append(n.Workers, node.Address)
		}
	}

	return n
}

func workerNode(c *localcluster.Cluster) localcluster.Node {
	for _, n := range c.Nodes {
		if !n.Type.IsControlPlane() {
			return n
		}
	}

	return localcluster.Node{}
}

// aegisVersion reads the tag and Go version machined was built with, from
// its --version line "machined TAG (commit …, goX.Y.Z, os/arch)", and
// returns what the nodes' Version answer should carry: the Talos tag of
// that build (version.TalosTagOf) and the Go version; and the Aegis
// version itself, which a bundle of that build names.
func aegisVersion(ctx context.Context, machined string) (talosTag, aegis, goVersion string, err error) {
	out, err := exec.CommandContext(ctx, machined, "--version").Output()
	if err != nil {
		return "", "", "", fmt.Errorf("%s --version: %w", machined, err)
	}

	fields := strings.Fields(strings.NewReplacer("(", " ", ")", " ", ",", " ").Replace(string(out)))
	if len(fields) < 2 {
		return "", "", "", fmt.Errorf("%s --version: unexpected %q", machined, out)
	}

	for _, f := range fields[2:] {
		if strings.HasPrefix(f, "go1") {
			return version.TalosTagOf(fields[1]), fields[1], f, nil
		}
	}

	return "", "", "", fmt.Errorf("%s --version: no Go version in %q", machined, out)
}
