package e2e

import (
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/client"

	"github.com/aegis-os/aegis/internal/version"
)

// checkTalosVersionTag: a node's tag is the Talos API version with the
// Aegis build as build metadata (what talosctl parses and compares).
func checkTalosVersionTag(t *testing.T, tag string) {
	t.Helper()

	own, api, ok := version.FromTalosTag(tag)
	if !ok || api != version.TalosAPI || !version.IsSemver(own) {
		t.Fatalf("Version tag %q: Aegis %q, Talos API %q, %v", tag, own, api, ok)
	}
}

// checkServiceLogs reads the log of every service ServiceList names, as
// Talos's LogsSuite does, and a log the node lacks through apid's fan-out,
// whose error Talos's suite matches word for word.
func checkServiceLogs(t *testing.T, c *client.Client) {
	list, err := c.ServiceList(ctx(t))
	if err != nil {
		t.Fatal(err)
	}

	for _, s := range list.Messages[0].GetServices() {
		stream, err := c.Logs(ctx(t), "system", common.ContainerDriver_CONTAINERD, s.GetId(), false, -1)
		if err != nil {
			t.Fatal(err)
		}

		r, err := client.ReadStream(stream)
		if err != nil {
			t.Fatal(err)
		}

		if n, err := io.Copy(io.Discard, r); err != nil || n == 0 {
			t.Errorf("log of %s: %d bytes, %v", s.GetId(), n, err)
		}
	}

	stream, err := c.Logs(client.WithNodes(ctx(t), machinedCP), "system", common.ContainerDriver_CONTAINERD, "nosuchservice", false, -1)
	if err != nil {
		t.Fatal(err)
	}

	msg, err := stream.Recv()
	if err != nil || !regexp.MustCompile(`.+log "nosuchservice" was not registered$`).MatchString(msg.GetMetadata().GetError()) {
		t.Fatalf("log of a service the node lacks: %v, %v", msg, err)
	}
}

// checkCallsInMachinedLog follows machined's log as Talos's LogsSuite does:
// once the log has been quiet for 200 ms, a call of another client must
// show within 200 ms.
func checkCallsInMachinedLog(t *testing.T, c *client.Client) {
	fctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	stream, err := c.Logs(fctx, "system", common.ContainerDriver_CONTAINERD, "machined", true, 0)
	if err != nil {
		t.Fatal(err)
	}

	chunks := make(chan string, 64)

	go func() {
		defer close(chunks)

		for {
			d, err := stream.Recv()
			if err != nil {
				return
			}

			chunks <- string(d.GetBytes())
		}
	}()

	const quiet = 200 * time.Millisecond

	for drained := time.Now(); ; {
		select {
		case _, ok := <-chunks:
			if !ok {
				t.Fatal("the follow of machined's log ended")
			}

			if time.Since(drained) > 10*time.Second {
				t.Fatal("machined's log is never quiet for 200 ms")
			}

			continue
		case <-time.After(quiet):
		}

		break
	}

	start := time.Now()
	if _, err := c.Version(ctx(t)); err != nil {
		t.Fatal(err)
	}

	for deadline := time.After(quiet); ; {
		select {
		case chunk, ok := <-chunks:
			if !ok {
				t.Fatal("the follow of machined's log ended")
			}

			if strings.Contains(chunk, `"grpc.method":"Version"`) {
				t.Logf("the line of a Version call reached a follow of machined's log %s after the call began", time.Since(start).Round(time.Millisecond))

				return
			}
		case <-deadline:
			t.Fatalf("no line of the Version call in machined's log within %s", quiet)
		}
	}
}
