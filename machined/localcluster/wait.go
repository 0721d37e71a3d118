package localcluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"

	"github.com/aegis-os/aegis/client/join"
)

// pollInterval is how often a booting cluster is looked at: each look
// reads the nodes' logs or makes one API call through a control plane,
// and a local cluster's steps (a node ready, a member promoted) come
// tenths of a second apart, so a longer period was a good part of a
// create's wait.
const pollInterval = 100 * time.Millisecond

// tailLines is how much of a failed node's log an error shows.
const tailLines = 15

// bootStatus is what a node's log says about its boot.
type bootStatus struct {
	text   string // current phase, for progress
	ready  bool
	failed string
}

// waitUp waits until every node reports ready, bootstrapping etcd on the
// first control plane as soon as that one is ready, then waits for the
// cluster to form (formEtcd). The bootstrap does not wait for the other
// nodes: a worker's boot waits for the answer to its first heartbeat,
// which needs etcd (up to machined's 5-s bound), so a bootstrap sent only
// once every node was ready cost every cluster with workers that wait.
func (c *Cluster) waitUp(ctx context.Context, timeout time.Duration, progress io.Writer) error {
	w := &bootWatch{c: c, start: time.Now(), progress: progress, shown: map[string]string{}}
	deadline := w.start.Add(timeout)

	cli, err := c.Client(ctx)
	if err != nil {
		return err
	}
	defer cli.Close() //nolint:errcheck // short-lived client

	if !c.skipBootstrap {
		first := c.ControlPlanes()[0]

		if err = w.until(ctx, deadline, timeout, []Node{first}); err != nil {
			return err
		}

		if err = c.Bootstrap(ctx, cli, deadline); err != nil {
			return err
		}

		w.show(first, "etcd bootstrapped")
	}

	if err = w.until(ctx, deadline, timeout, c.Nodes); err != nil {
		return err
	}

	return c.formEtcd(ctx, cli, deadline, w)
}

// bootWatch follows the boot of a cluster's nodes through their logs and
// shows each change of a node's stage once.
type bootWatch struct {
	c        *Cluster
	start    time.Time
	progress io.Writer
	shown    map[string]string // node name → the stage last shown
}

// show writes one progress line about node n.
func (w *bootWatch) show(n Node, text string) {
	fmt.Fprintf(w.progress, "[%5.1fs] %-28s %-12s %s\n", time.Since(w.start).Seconds(), n.Name, n.Address, text)
}

// until waits until every node of want reports ready; a node of the
// cluster that fails its boot or exits ends the wait with its log's tail.
func (w *bootWatch) until(ctx context.Context, deadline time.Time, timeout time.Duration, want []Node) error {
	for {
		pending, err := w.look(want)
		if err != nil || len(pending) == 0 {
			return err
		}

		if time.Now().After(deadline) {
			return fmt.Errorf("localcluster: %s not up after %s; last lines of %s:\n%s",
				strings.Join(pending, ", "), timeout, pending[0], w.c.Tail(w.c.node(pending[0]), tailLines))
		}

		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

// look reads every node's boot once, shows the changes, and returns the
// nodes of want that are not ready yet.
func (w *bootWatch) look(want []Node) ([]string, error) {
	var pending []string

	for _, n := range w.c.Nodes {
		st := w.c.bootStatus(n)

		switch {
		case st.failed != "":
			return nil, fmt.Errorf("localcluster: node %s failed to boot: %s\n%s", n.Name, st.failed, w.c.Tail(n, tailLines))
		case w.c.exited(n):
			return nil, fmt.Errorf("localcluster: node %s exited while booting:\n%s", n.Name, w.c.Tail(n, tailLines))
		}

		if st.text != w.shown[n.Name] {
			w.show(n, st.text)
			w.shown[n.Name] = st.text
		}

		if !st.ready && slices.ContainsFunc(want, func(m Node) bool { return m.Name == n.Name }) {
			pending = append(pending, n.Name)
		}
	}

	return pending, nil
}

// bootStatus reads the node's log for its latest boot progress.
func (c *Cluster) bootStatus(n Node) bootStatus { return c.bootStatusFrom(n, 0) }

// bootStatusFrom reads the node's log from offset on, so that the boot of a
// restarted node is not taken for the one before.
func (c *Cluster) bootStatusFrom(n Node, offset int64) bootStatus {
	data, err := os.ReadFile(c.LogPath(n))
	if err != nil || int64(len(data)) < offset {
		return bootStatus{text: "starting"}
	}

	data = data[offset:]

	st := bootStatus{text: "starting"}

	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var rec struct {
			Msg, Phase, Error string
		}

		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue
		}

		switch rec.Msg {
		case "boot phase":
			st = bootStatus{text: "boot phase: " + rec.Phase}
		case "boot failed":
			st.failed = fmt.Sprintf("phase %s: %s", rec.Phase, rec.Error)
		case "node ready":
			st = bootStatus{text: "ready", ready: true}
		case join.MsgTokenRefused:
			// It may heal (the token created meanwhile): a stage, not a failure.
			st.text = "join refused: " + rec.Error
		}
	}

	return st
}

// checkServices asks every node, through the first control plane's apid,
// for its services, and requires all of them to be running and healthy.
func (c *Cluster) checkServices(ctx context.Context, deadline time.Time) error {
	cli, err := c.Client(ctx)
	if err != nil {
		return err
	}
	defer cli.Close() //nolint:errcheck // short-lived client

	for {
		err = c.servicesUp(ctx, cli)
		if err == nil || time.Now().After(deadline) {
			return err
		}

		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

func (c *Cluster) servicesUp(ctx context.Context, cli *client.Client) error {
	callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()

	msgs, err := c.serviceLists(callCtx, cli)
	if err != nil {
		return fmt.Errorf("localcluster: asking the nodes for their services: %w", err)
	}

	if len(msgs) != len(c.Nodes) {
		return fmt.Errorf("localcluster: %d of %d nodes answered", len(msgs), len(c.Nodes))
	}

	for _, m := range msgs {
		for _, s := range m.GetServices() {
			if c.skipBootstrap && s.GetId() == "etcd" {
				continue
			}

			if s.GetState() != "Running" || !s.GetHealth().GetHealthy() {
				return fmt.Errorf("localcluster: %s on %s is %s", s.GetId(), m.GetMetadata().GetHostname(), s.GetState())
			}
		}
	}

	return nil
}

// serviceLists asks every node for its services through the first control
// plane's apid, which reaches the control planes (its endpoints) and the
// members. Without etcd there is no member list: each worker is then
// asked at its own apid.
func (c *Cluster) serviceLists(ctx context.Context, cli *client.Client) ([]*machine.ServiceList, error) {
	routed, direct := c.Addresses(), []Node(nil)

	if c.skipBootstrap {
		routed = nil

		for _, n := range c.Nodes {
			if n.Type.IsControlPlane() {
				routed = append(routed, n.Address)
			} else {
				direct = append(direct, n)
			}
		}
	}

	resp, err := cli.ServiceList(client.WithNodes(ctx, routed...))
	if err != nil {
		return nil, err
	}

	msgs := resp.GetMessages()

	for _, n := range direct {
		wc, err := c.NodeClient(ctx, n)
		if err != nil {
			return nil, err
		}

		resp, err := wc.ServiceList(ctx)
		wc.Close() //nolint:errcheck // short-lived client

		if err != nil {
			return nil, err
		}

		msgs = append(msgs, resp.GetMessages()...)
	}

	return msgs, nil
}

// NodeClient returns a Talos API client with the cluster's admin
// credentials that connects to node n's own apid.
func (c *Cluster) NodeClient(ctx context.Context, n Node) (*client.Client, error) {
	cfg, err := clientconfig.Open(c.ClientConfigPath())
	if err != nil {
		return nil, fmt.Errorf("localcluster: %w", err)
	}

	cli, err := client.New(ctx, client.WithConfig(cfg), client.WithEndpoints(n.Address))
	if err != nil {
		return nil, fmt.Errorf("localcluster: %w", err)
	}

	return cli, nil
}

// Client returns a Talos API client with the cluster's admin credentials.
func (c *Cluster) Client(ctx context.Context) (*client.Client, error) {
	cfg, err := clientconfig.Open(c.ClientConfigPath())
	if err != nil {
		return nil, fmt.Errorf("localcluster: %w", err)
	}

	cli, err := client.New(ctx, client.WithConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("localcluster: %w", err)
	}

	return cli, nil
}

// Tail returns the last lines of a node's machined log and of the logs of
// its services, each under its name.
func (c *Cluster) Tail(n Node, lines int) string {
	var b strings.Builder

	b.WriteString(tailFile("machined", c.LogPath(n), lines))

	for _, svc := range []string{"apid", "trustd", "etcd"} {
		if s := tailFile(svc, filepath.Join(c.StatePath(n), "logs", svc+".log"), lines); s != "" {
			b.WriteString(s)
		}
	}

	return b.String()
}

// tailFile renders the last lines of a log under a heading; a missing or
// empty file renders nothing.
func tailFile(name, path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil || len(bytes.TrimSpace(data)) == 0 {
		return ""
	}

	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}

	return "  --- " + name + " (" + path + ") ---\n    " + strings.Join(all, "\n    ") + "\n"
}

func (c *Cluster) node(name string) Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}

	return Node{}
}

// Stage is what node n's log says of its last boot: its phase, "ready",
// a failure, or a refused join ("join refused: trustd refused the node's
// token: …"); "stopped" when its machined does not run.
func (c *Cluster) Stage(n Node) string {
	if !c.running(n) {
		return "stopped"
	}

	st := c.bootStatusFrom(n, 0)
	if st.failed != "" {
		return "boot failed: " + st.failed
	}

	return st.text
}

// Running reports, per node, whether its machined runs.
func (c *Cluster) Running() map[string]bool {
	out := map[string]bool{}
	for _, n := range c.Nodes {
		out[n.Name] = c.running(n)
	}

	return out
}
