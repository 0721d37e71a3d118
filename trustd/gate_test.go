package trustd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// TestCheckOrder: token first, then the time gate, then the CSR; a refused
// request never spends a use of its token.
func TestCheckOrder(t *testing.T) {
	env := trustdtest.Start(t, trustdtest.Options{})
	ctx := testContext(t)
	client := env.Client(t, "")
	good := trustdtest.SourceCSR(t, ca.Ed25519, trustdtest.CallerIP)
	single := env.CreateToken(t, time.Hour, 1)

	tests := []struct {
		name  string
		token string
		csr   []byte
		code  codes.Code
	}{
		{name: "bad token, gate closed", token: "zzzzzz.0123456789abcdef", csr: good, code: codes.Unauthenticated},
		{name: "good token, gate closed", token: single, csr: good, code: codes.FailedPrecondition},
		{name: "good token, bad CSR, gate closed", token: single, csr: []byte("junk"), code: codes.FailedPrecondition},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := trustdtest.Call(ctx, client, tt.token, tt.csr)
			if status.Code(err) != tt.code {
				t.Fatalf("err = %v, want %s", err, tt.code)
			}

			if tt.code == codes.FailedPrecondition && status.Convert(err).Message() != trustd.ErrTimeNotSynced.Error() {
				t.Fatalf("message = %q", status.Convert(err).Message())
			}
		})
	}

	env.Gate.Set(true)

	// The refusals above spent nothing: the single-use token still works once.
	if _, err := trustdtest.Call(ctx, client, single, []byte("junk")); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad CSR with gate open: %v", err)
	}

	if _, err := trustdtest.Call(ctx, client, single, good); err != nil {
		t.Fatalf("single-use token after refusals: %v", err)
	}

	if _, err := trustdtest.Call(ctx, client, single, good); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("single-use token twice: %v", err)
	}

	for _, rec := range env.Audit.Records() {
		if rec.String(trustd.AuditDecision) == trustd.DecisionIssued && rec.String(trustd.AuditTokenID) != single[:6] {
			t.Fatalf("unexpected issuance: %+v", rec)
		}
	}
}

// TestHealthFollowsGate: NOT_SERVING until the gate opens, and again when it
// closes.
func TestHealthFollowsGate(t *testing.T) {
	env := trustdtest.Start(t, trustdtest.Options{})
	ctx := testContext(t)
	hc := healthpb.NewHealthClient(env.Dial(t, ""))

	for i, open := range []bool{false, true, false, true} {
		env.Gate.Set(open)

		want := healthpb.HealthCheckResponse_NOT_SERVING
		if open {
			want = healthpb.HealthCheckResponse_SERVING
		}

		for _, svc := range []string{"", "securityapi.SecurityService"} {
			if err := waitHealth(ctx, hc, svc, want); err != nil {
				t.Fatalf("step %d, service %q: %v", i, svc, err)
			}
		}
	}
}

// waitHealth polls until the status is want: the server updates its health
// from a goroutine watching the gate, so the change lands shortly after Set.
func waitHealth(ctx context.Context, hc healthpb.HealthClient, svc string, want healthpb.HealthCheckResponse_ServingStatus) error {
	for {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil {
			return err
		}

		if resp.GetStatus() == want {
			return nil
		}

		select {
		case <-ctx.Done():
			return errors.New("health stayed " + resp.GetStatus().String())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func TestStreamsRefused(t *testing.T) {
	env := trustdtest.Start(t, trustdtest.Options{GateOpen: true})
	hc := healthpb.NewHealthClient(env.Dial(t, ""))

	stream, err := hc.Watch(testContext(t), &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = stream.Recv()
	}

	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("health Watch: %v, want Unimplemented", err)
	}
}
