package conformance

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/api/revocations"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
)

// revocationWait bounds how long the revoked certificate may still be
// served after the revoke returned: control planes follow etcd, workers
// poll a control plane every second.
const revocationWait = 10 * time.Second

// revocationCases check client-certificate revocation from outside: who
// may revoke, what a bad request gets, and that a revoked certificate is
// refused by the target and the worker, on a new connection (the
// handshake) and on one opened before (the next call).
func revocationCases() []*Case {
	revoke := func(serial string) call {
		return func(ctx context.Context, c *grpc.ClientConn) error {
			_, err := revocations.NewRevocationServiceClient(c).Revoke(ctx, &revocations.RevokeRequest{Serial: serial})

			return err
		}
	}
	as := func(name string, node func(*Env) string, id func(*identities) Identity, want codes.Code, c call) *Case {
		return &Case{Group: "apid", Name: name, Expected: want.String(), Run: func(ctx context.Context, e *Env, _ *Report) string {
			return codeOf(e.callAs(ctx, node(e), id(e.ids), nil, c))
		}}
	}
	target := func(e *Env) string { return e.Target }
	worker := func(e *Env) string { return e.Worker }
	admin := func(i *identities) Identity { return i.admin }

	return []*Case{
		as("RevocationService/Revoke as os:operator", target, func(i *identities) Identity { return i.operator },
			codes.PermissionDenied, revoke("abc")),
		as("RevocationService/Revoke of a serial that is not hexadecimal", target, admin, codes.InvalidArgument, revoke("not-a-serial")),
		as("RevocationService/Revoke with a reason over 256 bytes", target, admin, codes.InvalidArgument,
			func(ctx context.Context, c *grpc.ClientConn) error {
				_, err := revocations.NewRevocationServiceClient(c).Revoke(ctx,
					&revocations.RevokeRequest{Serial: "abc", Reason: strings.Repeat("x", 257)})

				return err
			}),
		as("RevocationService/Revoke on a worker (no etcd)", worker, admin, codes.FailedPrecondition, revoke("abc")),
		as("RevocationService/List as admin", target, admin, codes.OK, func(ctx context.Context, c *grpc.ClientConn) error {
			_, err := revocations.NewRevocationServiceClient(c).List(ctx, &revocations.ListRequest{})

			return err
		}),
		{Group: "apid", Name: "a revoked os:admin certificate on the target and the worker", Expected: tlsRefused + " everywhere",
			Run: revokedRefused},
	}
}

// revokedRefused revokes a new os:admin certificate (one hour of life, so
// its entry leaves the list within the hour) and checks that the target
// and the worker end the connection it opened before and refuse a new one.
func revokedRefused(ctx context.Context, e *Env, r *Report) string {
	id, err := issued("conformance-revoked", e.osCA, ca.ProfileClient, time.Now(), role.Admin)
	if err != nil {
		return err.Error()
	}

	nodes := []string{e.Target, e.Worker}
	open := map[string]*grpc.ClientConn{}

	for _, n := range nodes {
		conn, err := e.dial(n, id)
		if err != nil {
			return err.Error()
		}
		defer conn.Close() //nolint:errcheck // the case's own connection

		if _, err := machine.NewMachineServiceClient(conn).Version(ctx, &emptypb.Empty{}); err != nil {
			return fmt.Sprintf("before the revocation, %s: %s", n, codeOf(err))
		}

		open[n] = conn
	}

	leaf := id.Chain[0]
	if err := e.callAs(ctx, e.Target, e.ids.admin, nil, func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := revocations.NewRevocationServiceClient(c).Revoke(ctx, &revocations.RevokeRequest{
			Serial: leaf.SerialNumber.Text(16), NotAfter: timestamppb.New(leaf.NotAfter), Reason: "conformance",
		})

		return err
	}); err != nil {
		return "Revoke: " + codeOf(err)
	}

	for _, n := range nodes {
		if got := waitRevoked(ctx, e, n, id, open[n], r); got != tlsRefused {
			return fmt.Sprintf("%s on %s", got, n)
		}
	}

	return tlsRefused + " everywhere"
}

// waitRevoked waits until node refuses id's next call on conn and a new
// handshake, and returns the handshake's outcome.
func waitRevoked(ctx context.Context, e *Env, node string, id Identity, conn *grpc.ClientConn, r *Report) string {
	deadline := time.Now().Add(revocationWait)

	for {
		_, err := machine.NewMachineServiceClient(conn).Version(ctx, &emptypb.Empty{})
		if status.Code(err) == codes.Unauthenticated {
			if !strings.Contains(err.Error(), "revoked") {
				r.Problemf("%s: the call was refused with %v, which does not say the certificate is revoked", node, err)
			}

			break
		}

		if time.Now().After(deadline) {
			return fmt.Sprintf("still served (%s) after %s", codeOf(err), revocationWait)
		}

		time.Sleep(20 * time.Millisecond)
	}

	got, _ := handshake(ctx, apidAddr(node), e.clientTLS(node, id))

	return got
}
