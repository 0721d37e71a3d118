package rotation_test

import (
	"context"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/rotation"
	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/client/rotationstate"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	rot "github.com/aegis-os/aegis/machined/rotation"
)

// TestServerRecord: Put is a compare-and-swap on the record's revision;
// who started a rotation and when come from the caller's certificate and
// the clock, and stay until the rotation ends; a key is refused; etcd gone
// is Unavailable, a node without etcd FailedPrecondition.
func TestServerRecord(t *testing.T) {
	e, stop := etcdtest.Start(t)
	cli := etcdtest.Client(t, e)
	now := time.Now()
	clk := clock.NewFake(now)

	store, err := rot.NewStore(rot.StoreConfig{Client: cli, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}

	srv := rot.NewServer(rot.ServerConfig{
		Store:   func() (*rot.Store, error) { return store, nil },
		Reissue: func(context.Context) (map[string]*x509.Certificate, error) { return nil, errors.New("unused") },
		Clock:   clk,
	})

	oldCA, newCA := catest.NewCA(t, ca.Ed25519, now), catest.NewCA(t, ca.Ed25519, now)
	rec := func(step int32) *rotation.Rotation {
		return &rotation.Rotation{Ca: "os", Step: step, OldCa: oldCA.CertPEM, NewCa: newCA.CertPEM, StartedBy: "forged"}
	}

	operator, _, err := catest.NewIssuer(t, oldCA, now).IssueNewKey(ca.KeyRequest{CommonName: "operator", Profile: ca.ProfileClient, Roles: role.NewSet(role.Admin)})
	if err != nil {
		t.Fatal(err)
	}

	md := metadata.MD{}
	authz.SetCertificateMetadata(md, operator.Cert)
	ctx := metadata.NewIncomingContext(context.Background(), md)

	got, err := srv.Get(ctx, &rotation.GetRequest{Ca: "os"})
	if err != nil || got.GetMessages()[0].GetRotation() != nil || got.GetMessages()[0].GetRevision() != 0 {
		t.Fatalf("Get before any rotation: %v, %v", got, err)
	}

	put, err := srv.Put(ctx, &rotation.PutRequest{Rotation: rec(rotationstate.StepStarted)})
	if err != nil {
		t.Fatal(err)
	}

	first := put.GetMessages()[0]
	if first.GetRotation().GetStartedBy() != operator.Cert.Subject.String() || !first.GetRotation().GetStartedAt().AsTime().Equal(now) {
		t.Fatalf("started by %q at %v", first.GetRotation().GetStartedBy(), first.GetRotation().GetStartedAt().AsTime())
	}

	if _, err := srv.Put(ctx, &rotation.PutRequest{Rotation: rec(rotationstate.StepAccepted)}); status.Code(err) != codes.Aborted {
		t.Fatalf("a put over a stale revision: %v, want Aborted", err)
	}

	clk.Advance(time.Minute)

	next, err := srv.Put(context.Background(), &rotation.PutRequest{Rotation: rec(rotationstate.StepAccepted), ExpectedRevision: first.GetRevision()})
	if err != nil {
		t.Fatal(err)
	}

	if r := next.GetMessages()[0].GetRotation(); r.GetStartedBy() != operator.Cert.Subject.String() || !r.GetStartedAt().AsTime().Equal(now) || !r.GetUpdatedAt().AsTime().Equal(clk.Now()) {
		t.Fatalf("the origin of a rotation in progress changed: %v", r)
	}

	withKey := rec(rotationstate.StepIssuing)
	withKey.NewCa = append(withKey.NewCa, newCA.KeyPEM...)

	if _, err := srv.Put(ctx, &rotation.PutRequest{Rotation: withKey, ExpectedRevision: next.GetMessages()[0].GetRevision()}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a record holding a key: %v, want InvalidArgument", err)
	}

	stop()

	if _, err := srv.Get(ctx, &rotation.GetRequest{Ca: "os"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("Get without etcd: %v, want Unavailable", err)
	}

	noEtcd := rot.NewServer(rot.ServerConfig{Store: func() (*rot.Store, error) { return nil, rot.ErrNoEtcd }})
	if _, err := noEtcd.Get(ctx, &rotation.GetRequest{Ca: "os"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Get on a worker: %v, want FailedPrecondition", err)
	}
}
