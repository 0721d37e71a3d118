package conformance

import (
	"context"
	"crypto/x509"
	"fmt"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/apid"
	"github.com/aegis-os/aegis/authz/role"
)

// shortLife is how long the certificate of the expiry case is still
// valid when the case starts.
const shortLife = 20 * time.Second

// streamCases hold streams open: one past its certificate's expiry, and
// more than one client key may hold.
func streamCases() []*Case {
	return []*Case{
		{
			Group: "apid", Name: fmt.Sprintf("Events follow by a reader whose certificate expires %s after it opens", shortLife),
			Expected: "Unauthenticated", Run: followPastExpiry,
		},
		{
			Group: "apid", Name: fmt.Sprintf("%d Events follows by one reader over two connections", apid.MaxStreamsPerIdentity+1),
			Expected: "ResourceExhausted", Run: followsOverIdentityCap,
		},
	}
}

// reader mints an os:reader client of the target's CA with life left.
func (e *Env) reader(name string, life time.Duration) (Identity, error) {
	start := time.Now().Add(-time.Minute)

	return leaf(name, certSpec{
		cn: name, orgs: []string{string(role.Reader)}, eku: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		notBefore: start, life: time.Minute + life,
	}, e.osCA)
}

// openFollow opens an Events follow on conn and waits for its first
// (empty) event: the follow is then held open by apid and machined.
func openFollow(ctx context.Context, conn *grpc.ClientConn) (machine.MachineService_EventsClient, error) {
	s, err := machine.NewMachineServiceClient(conn).Events(ctx, &machine.EventsRequest{})
	if err != nil {
		return nil, err
	}

	_, err = s.Recv()

	return s, err
}

func followPastExpiry(ctx context.Context, e *Env, r *Report) string {
	id, err := e.reader("short-lived reader", shortLife)
	if err != nil {
		r.Problemf("minting the reader: %v", err)

		return "not run"
	}

	conn, err := e.dial(e.Target, id)
	if err != nil {
		r.Problemf("dial: %v", err)

		return "not run"
	}
	defer conn.Close() //nolint:errcheck // the case's own connection

	expiry := id.Chain[0].NotAfter

	ctx, cancel := context.WithDeadline(ctx, expiry.Add(30*time.Second))
	defer cancel()

	s, err := openFollow(ctx, conn)
	if err != nil {
		return codeOf(err)
	}

	for err == nil {
		_, err = s.Recv()
	}

	if time.Now().Before(expiry) {
		r.Problemf("ended before the certificate expired (%s): %v", expiry.Format(time.RFC3339), err)
	}

	if msg := status.Convert(err).Message(); !strings.Contains(msg, "expired") {
		r.Problemf("the end does not say the certificate expired: %q", msg)
	}

	return codeOf(err)
}

func followsOverIdentityCap(ctx context.Context, e *Env, r *Report) string {
	id, err := e.reader("flooding reader", time.Hour)
	if err != nil {
		r.Problemf("minting the reader: %v", err)

		return "not run"
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // closes every follow

	conns := make([]*grpc.ClientConn, 2)
	for i := range conns {
		if conns[i], err = e.dial(e.Target, id); err != nil {
			r.Problemf("dial: %v", err)

			return "not run"
		}
		defer conns[i].Close() //nolint:errcheck,revive // the case's own connections
	}

	for i := range apid.MaxStreamsPerIdentity {
		if _, err := openFollow(ctx, conns[i%2]); err != nil {
			r.Problemf("follow %d of %d refused: %v", i+1, apid.MaxStreamsPerIdentity, err)

			return codeOf(err)
		}
	}

	_, err = openFollow(ctx, conns[0])

	if want := fmt.Sprintf("limit %d", apid.MaxStreamsPerIdentity); !strings.Contains(status.Convert(err).Message(), want) {
		r.Problemf("the refusal does not name the cap (%s): %v", want, err)
	}

	return codeOf(err)
}
