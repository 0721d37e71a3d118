package membership_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/membership"
	"github.com/aegis-os/aegis/authz"
	membershippkg "github.com/aegis-os/aegis/machined/membership"
)

// fakeRecord is the record of certified nodes and member entries a
// Server is given: what it holds and what was done to it.
type fakeRecord struct {
	nodes      []*membershippkg.CertifiedNode
	listErr    error
	entries    []*membershippkg.Member
	removeErr  error
	rebound    bool // the released name is bound again at once
	removedFor []string
	released   [][]string
}

func (f *fakeRecord) certified(context.Context) ([]*membershippkg.CertifiedNode, error) {
	return slices.Clone(f.nodes), f.listErr
}

func (f *fakeRecord) removeEntries(_ context.Context, node string) ([]*membershippkg.Member, error) {
	f.removedFor = append(f.removedFor, node)

	return f.entries, f.removeErr
}

func (f *fakeRecord) release(_ context.Context, names, addresses []string) error {
	f.released = append(f.released, append(slices.Clone(names), addresses...))

	if !f.rebound {
		f.nodes = slices.DeleteFunc(f.nodes, func(n *membershippkg.CertifiedNode) bool { return slices.Contains(names, n.GetHostname()) })
	}

	return nil
}

func (f *fakeRecord) server(log *bytes.Buffer) *membershippkg.Server {
	return membershippkg.NewServer(membershippkg.ServerConfig{
		Certified: f.certified, RemoveEntries: f.removeEntries, Release: f.release,
		Logger: slog.New(slog.NewTextHandler(log, nil)),
	})
}

func certifiedNodes() []*membershippkg.CertifiedNode {
	return []*membershippkg.CertifiedNode{
		{Hostname: "worker-1", Addresses: []string{"10.0.0.5"}, Role: membershippkg.RoleWorker},
		{Hostname: "cp-1", Addresses: []string{"10.0.0.1"}, Role: membershippkg.RoleControlPlane},
	}
}

// TestCertified: the list sorted by hostname; a node without etcd
// FailedPrecondition; etcd's failures Unavailable.
func TestCertified(t *testing.T) {
	ctx := context.Background()

	resp, err := (&fakeRecord{nodes: certifiedNodes()}).server(&bytes.Buffer{}).Certified(ctx, &membership.CertifiedRequest{})
	if err != nil {
		t.Fatal(err)
	}

	var got []string
	for _, n := range resp.GetMessages()[0].GetNodes() {
		got = append(got, n.GetHostname())
	}

	if !slices.Equal(got, []string{"cp-1", "worker-1"}) {
		t.Fatalf("Certified = %v, want cp-1, worker-1", got)
	}

	for _, tt := range []struct {
		name string
		srv  *membershippkg.Server
		code codes.Code
		text string
	}{
		{"worker", membershippkg.NewServer(membershippkg.ServerConfig{}), codes.FailedPrecondition, "use a control-plane endpoint"},
		{"control plane without etcd", (&fakeRecord{listErr: membershippkg.ErrNoEtcd}).server(&bytes.Buffer{}), codes.FailedPrecondition, "kept in etcd"},
		{"no quorum", (&fakeRecord{listErr: fmt.Errorf("%w: context deadline exceeded", membershippkg.ErrUnavailable)}).server(&bytes.Buffer{}), codes.Unavailable, "etcd unavailable"},
		{"other failure", (&fakeRecord{listErr: errors.New("namestore: etcd members: boom")}).server(&bytes.Buffer{}), codes.Unavailable, "boom"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.srv.Certified(ctx, &membership.CertifiedRequest{})
			if status.Code(err) != tt.code || !strings.Contains(status.Convert(err).Message(), tt.text) {
				t.Fatalf("Certified: %v, want %s with %q", err, tt.code, tt.text)
			}
		})
	}
}

// TestRemove: a gone worker's entry deleted and its name released, one
// audit line naming who removed what; refusals (control plane, alive, not
// found, bad name, no etcd) change nothing.
func TestRemove(t *testing.T) {
	aged := entry("worker-1", "10.0.0.5")
	aged.Role = membershippkg.RoleWorker

	for _, tt := range []struct {
		name     string
		rec      *fakeRecord
		node     string
		code     codes.Code
		text     string
		released bool
	}{
		{name: "by hostname", rec: &fakeRecord{nodes: certifiedNodes()}, node: "Worker-1", code: codes.OK, released: true},
		{name: "by address, aged-out entry", rec: &fakeRecord{nodes: certifiedNodes(), entries: []*membershippkg.Member{aged}}, node: "10.0.0.5", code: codes.OK, released: true},
		{name: "entry without a binding", rec: &fakeRecord{entries: []*membershippkg.Member{aged}}, node: "worker-1", code: codes.OK},
		{
			name: "control plane", rec: &fakeRecord{nodes: certifiedNodes()}, node: "10.0.0.1", code: codes.FailedPrecondition,
			text: "membership: a control plane is not removed here: cp-1 (10.0.0.1) is a control plane; it leaves the cluster through etcd's member removal",
		},
		{
			name: "alive", node: "worker-1", code: codes.FailedPrecondition, text: "stop or reset it first",
			rec: &fakeRecord{nodes: certifiedNodes(), removeErr: fmt.Errorf("%w: worker-1 (10.0.0.5) sent a heartbeat 1s ago; stop or reset it first", membershippkg.ErrAlive)},
		},
		{
			name: "bound again meanwhile", rec: &fakeRecord{nodes: certifiedNodes(), rebound: true}, node: "worker-1", code: codes.FailedPrecondition,
			text: "worker-1 (10.0.0.5) holds its name again", released: true,
		},
		{name: "unknown", rec: &fakeRecord{nodes: certifiedNodes()}, node: "worker-9", code: codes.NotFound, text: "no node worker-9 holds a live certificate or a member entry"},
		{name: "not a name", rec: &fakeRecord{}, node: "a b", code: codes.InvalidArgument, text: "neither a hostname nor an IP address"},
		{name: "no quorum", rec: &fakeRecord{listErr: membershippkg.ErrUnavailable}, node: "worker-1", code: codes.Unavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var log bytes.Buffer

			md := metadata.MD{}
			authz.SetCallerMetadata(md, authz.Caller{Serial: "5f3a", Subject: "O=os:admin,CN=ops"})

			resp, err := tt.rec.server(&log).Remove(metadata.NewIncomingContext(context.Background(), md), &membership.RemoveRequest{Node: tt.node})
			if status.Code(err) != tt.code || !strings.Contains(status.Convert(err).Message(), tt.text) {
				t.Fatalf("Remove(%s): %v, want %s with %q", tt.node, err, tt.code, tt.text)
			}

			if tt.code == codes.FailedPrecondition && strings.Contains(tt.text, "control plane") && len(tt.rec.removedFor) > 0 {
				t.Fatalf("entries removed for a control plane: %v", tt.rec.removedFor)
			}

			if got := len(tt.rec.released) > 0; got != tt.released {
				t.Fatalf("released %v, want some: %v", tt.rec.released, tt.released)
			}

			if tt.code != codes.OK {
				if strings.Contains(log.String(), "node removed") {
					t.Fatalf("a refusal logged a removal: %s", log.String())
				}

				return
			}

			out := resp.GetMessages()[0]
			if out.GetHostname() != "worker-1" || !slices.Equal(out.GetAddresses(), []string{"10.0.0.5"}) ||
				out.GetEntryDeleted() != (len(tt.rec.entries) > 0) || out.GetNameReleased() != tt.released {
				t.Fatalf("Removed = %v", out)
			}

			if !strings.Contains(log.String(), `msg="membership: node removed from the cluster" node=worker-1 addresses=10.0.0.5`) ||
				!strings.Contains(log.String(), `caller_serial=5f3a caller_subject="O=os:admin,CN=ops"`) {
				t.Fatalf("audit line missing: %s", log.String())
			}
		})
	}

	t.Run("a worker serves no Remove", func(t *testing.T) {
		_, err := membershippkg.NewServer(membershippkg.ServerConfig{}).Remove(context.Background(), &membership.RemoveRequest{Node: "worker-1"})
		if status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("Remove on a worker: %v, want FailedPrecondition", err)
		}
	})
}
