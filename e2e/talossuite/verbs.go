package talossuite

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// verb is one talosctl command line for a command of the guide's table.
type verb struct {
	// command is the command as the guide's table names it.
	command string
	args    func(r *verbRunner) ([]string, error)
	// follow: the command streams until stopped.
	follow bool
	// accept is the documented refusal, found in the output.
	accept string
	// notRun says why the command is not run.
	notRun string
	// after runs once the command passed (waits for a node to return).
	after func(ctx context.Context, r *verbRunner) error
}

// fixed returns the command line whatever came before.
func fixed(args ...string) func(*verbRunner) ([]string, error) {
	return func(*verbRunner) ([]string, error) { return args, nil }
}

// verbPlan is the order of the stage: read-only commands on the first
// control plane, then harmless writes, then the destructive ones, each
// on a node of its own: etcd leave on the third control plane and
// remove-member of the second (etcd keeps the first), reboot and shutdown
// of the second worker, reset of the first.
func verbPlan() []verb {
	return []verb{
		{command: "version", args: onCP(0, "version")},
		{command: "memory", args: onCP(0, "memory")},
		{command: "services", args: onCP(0, "services")},
		{command: "service ID", args: onCP(0, "service", "etcd")},
		{command: "logs ID [-f]", args: onCP(0, "logs", "machined", "--tail", "5")},
		{command: "logs ID [-f]", args: onCP(0, "logs", "machined", "--tail", "5", "-f"), follow: true},
		{command: "events", args: onCP(0, "events", "--tail", "5"), follow: true},
		{command: "etcd members", args: onCP(0, "etcd", "members")},
		{command: "etcd status", args: onCP(0, "etcd", "status")},
		{command: "etcd alarm list", args: onCP(0, "etcd", "alarm", "list")},
		{command: "etcd snapshot FILE", args: func(r *verbRunner) ([]string, error) {
			return nodeArgs(r.opts.Nodes.ControlPlanes[0], "etcd", "snapshot", filepath.Join(r.opts.TempDir, "etcd.snapshot")), nil
		}},
		{command: "config new", args: func(r *verbRunner) ([]string, error) {
			return nodeArgs(r.opts.Nodes.ControlPlanes[0], "config", "new", filepath.Join(r.opts.TempDir, "reader.talosconfig"), "--roles", "os:reader"), nil
		}},
		{command: "get rd", args: onCP(0, "get", "rd")},
		{command: "get TYPE [ID]", args: onCP(0, "get", "members")},
		{command: "get TYPE [ID]", args: onCP(0, "get", "services", "etcd")},
		{command: "get TYPE --watch", args: onCP(0, "get", "machinestatus", "--watch"), follow: true},
		{command: "time [--check SERVER]", args: onCP(0, "time")},
		{command: "time [--check SERVER]", args: timeCheck},
		{command: "processes", args: onCP(0, "processes")},
		{command: "read PATH", args: onCP(0, "read", "/proc/sys/kernel/random/boot_id")},
		{command: "rotate-ca --kubernetes=false", args: onCP(0, "rotate-ca", "--kubernetes=false"), accept: "aegisctl rotate-ca"},
		{command: "dmesg", args: onCP(0, "dmesg"), accept: "FailedPrecondition"},
		{command: "health", args: onCP(0, "health", "--wait-timeout", "1m")},
		{command: "containers", args: onCP(0, "containers")},
		{command: "stats", args: onCP(0, "stats")},
		{command: "image list", args: onCP(0, "image", "list", "--namespace", "system")},
		// Harmless writes.
		{command: "etcd alarm disarm", args: onCP(0, "etcd", "alarm", "disarm")},
		{command: "etcd defrag", args: onCP(0, "etcd", "defrag")},
		{command: "etcd forfeit-leadership", args: onCP(0, "etcd", "forfeit-leadership")},
		{command: "service ID restart", args: onCP(1, "service", "trustd", "restart")},
		{command: "restart ID", args: onCP(1, "restart", "trustd")},
		{command: "apply-config -f FILE [--mode …] [--dry-run]", args: func(r *verbRunner) ([]string, error) {
			return nodeArgs(r.opts.Nodes.Workers[0], "apply-config", "-f", r.opts.WorkerConfig, "--dry-run"), nil
		}},
		{command: "bootstrap", args: onCP(0, "bootstrap"), accept: "already bootstrapped"},
		// The node keeps the version it ran, so the rollback that follows
		// has one to go back to.
		{command: "upgrade --image BUNDLE", args: upgradeBundle, after: waitWorkerRestart(1)},
		{command: "rollback", args: onWorker(1, "rollback"), after: waitWorkerRestart(1)},
		{command: "bootstrap --recover-from FILE", notRun: "recovery needs a control plane whose etcd was wiped and never bootstrapped; " +
			"e2e TestEtcdCluster recovers one through the machinery client"},
		// Destructive, each on a node of its own.
		{command: "etcd leave", args: onCP(2, "etcd", "leave")},
		{command: "etcd remove-member ID", args: removeMember},
		{command: "reboot", args: onWorker(1, "reboot", "--wait"), after: waitWorker(1)},
		{command: "reset [--graceful] [--reboot] [--system-labels-to-wipe EPHEMERAL]",
			args: onWorker(0, "reset", "--graceful=false", "--reboot", "--system-labels-to-wipe", "EPHEMERAL")},
		{command: "shutdown", args: onWorker(1, "shutdown")},
	}
}

func nodeArgs(node string, args ...string) []string {
	return append(args, "--nodes", node)
}

func onCP(i int, args ...string) func(*verbRunner) ([]string, error) {
	return func(r *verbRunner) ([]string, error) { return nodeArgs(r.opts.Nodes.ControlPlanes[i], args...), nil }
}

func onWorker(i int, args ...string) func(*verbRunner) ([]string, error) {
	return func(r *verbRunner) ([]string, error) { return nodeArgs(r.opts.Nodes.Workers[i], args...), nil }
}

// timeCheck checks the first control plane's time against the NTP server
// its `time` answer named, read by the columns of the answer's header. A
// node without a server (a local cluster trusts its host's clock) has
// nothing to check against: the command is not run.
func timeCheck(r *verbRunner) ([]string, error) {
	lines := strings.Split(strings.TrimSpace(r.outputs["time [--check SERVER]"]), "\n")
	if len(lines) < 2 {
		return nil, fmt.Errorf("no answer of talosctl time to take an NTP server from: %q", strings.Join(lines, " / "))
	}

	from, to := strings.Index(lines[0], "NTP-SERVER"), strings.Index(lines[0], "NODE-TIME")
	if from < 0 || to < from || len(lines[1]) < to {
		return nil, fmt.Errorf("talosctl time's header has no NTP-SERVER column: %q", lines[0])
	}

	server := strings.TrimSpace(lines[1][from:to])
	if server == "" {
		return nil, notRun("the node names no NTP server (a local cluster's node trusts its host clock), so there is none of its own to check against")
	}

	return nodeArgs(r.opts.Nodes.ControlPlanes[0], "time", "--check", server), nil
}

// upgradeBundle upgrades the second worker from the bundle the stage was
// given, a file on the same host as the node; talosctl waits (its default)
// for the node to be ready again with a new boot ID.
func upgradeBundle(r *verbRunner) ([]string, error) {
	if r.opts.Bundle == "" {
		return nil, notRun("no release bundle was given to upgrade from")
	}

	return nodeArgs(r.opts.Nodes.Workers[1], "upgrade", "--image", r.opts.Bundle, "--timeout", VerbTimeout.String()), nil
}

// notRun is the reason a command is not run, found when its arguments are
// made.
type notRun string

func (n notRun) Error() string { return string(n) }

// removeMember removes the second control plane's etcd member through the
// first, by the ID `etcd members` listed for its peer address.
func removeMember(r *verbRunner) ([]string, error) {
	target := r.opts.Nodes.ControlPlanes[1]

	for _, l := range strings.Split(r.outputs["etcd members"], "\n") {
		f := strings.Fields(l)
		if len(f) > 2 && strings.Contains(l, "//"+target+":") {
			return nodeArgs(r.opts.Nodes.ControlPlanes[0], "etcd", "remove-member", f[1]), nil
		}
	}

	return nil, fmt.Errorf("talosctl etcd members listed no member with a peer URL on %s", target)
}

// waitWorkerRestart waits for a worker whose version switch was just
// asked for (upgrade, rollback: talosctl returns at once) to go down and
// answer again. The node serves for a moment before it stops
// (machined's stopNotice), so an answer right after the call is still the
// old boot's: the wait first sees the node stop answering, for
// restartGoneWithin at most (a restart quicker than the polls leaves the
// node answering again by then), then waits until it answers.
func waitWorkerRestart(i int) func(context.Context, *verbRunner) error {
	return func(ctx context.Context, r *verbRunner) error {
		node := r.opts.Nodes.Workers[i]

		for gone := time.Now().Add(restartGoneWithin); time.Now().Before(gone); {
			if _, err := r.talosctl(ctx, nodeArgs(node, "version"), false); err != nil {
				break
			}

			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(restartPoll):
			}
		}

		return waitWorker(i)(ctx, r)
	}
}

// restartGoneWithin bounds waitWorkerRestart's wait for the node to stop
// answering; restartPoll is how often it asks.
const (
	restartGoneWithin = 10 * time.Second
	restartPoll       = 200 * time.Millisecond
)

// waitWorker waits until a rebooted worker answers talosctl version again.
func waitWorker(i int) func(context.Context, *verbRunner) error {
	return func(ctx context.Context, r *verbRunner) error {
		node := r.opts.Nodes.Workers[i]
		deadline := time.Now().Add(VerbTimeout)

		for time.Now().Before(deadline) {
			if _, err := r.talosctl(ctx, nodeArgs(node, "version"), false); err == nil {
				return nil
			}

			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(2 * time.Second):
			}
		}

		return fmt.Errorf("%s did not answer talosctl version within %s of its reboot", node, VerbTimeout)
	}
}
