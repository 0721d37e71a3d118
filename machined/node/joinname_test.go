package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/client/join"
	"github.com/aegis-os/aegis/internal/clock"
)

// TestRefusesName: only trustd refusing the name as not allowed (a
// control plane of the previous version) makes a worker join without it;
// a name held by another node or a control plane never does.
func TestRefusesName(t *testing.T) {
	refused := func(code codes.Code, msg string) error {
		return fmt.Errorf("%w by 10.0.0.1:50001: %w", join.ErrRefused, status.Error(code, msg))
	}

	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"older trustd", refused(codes.InvalidArgument, `trustd: bad certificate request: sanpolicy: SAN is neither the caller's address nor allowed by the token: DNS name "worker-1"`), true},
		{"another name refused", refused(codes.InvalidArgument, `sanpolicy: SAN is neither the caller's address nor allowed by the token: DNS name "w.example"`), false},
		{"held by another node", refused(codes.PermissionDenied, `trustd: the name is held by another node: worker-1 is bound to the node at [10.0.0.6]`), false},
		{"a control plane's", refused(codes.PermissionDenied, `trustd: a token never obtains a certificate for a control plane's address or name: worker-1`), false},
		{"unavailable", errors.New("join: 10.0.0.1:50001: unavailable"), false},
	} {
		if got := refusesName(tt.err, "worker-1"); got != tt.want {
			t.Errorf("%s: refusesName = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestJoinPairWithoutName: the fallback asks for everything but the name.
func TestJoinPairWithoutName(t *testing.T) {
	c := &certController{cfg: &certs.MachineConfig{}, hostname: "worker-1"}

	p := c.joinPair("10.0.0.5", "10.0.0.5", []string{"10.0.0.5", "worker-1", "w.example"}, func(*certs.MachineConfig) int { return 1 })
	if !p.nameInBundle || fmt.Sprint(p.bare.sans) != "[10.0.0.5 w.example]" || fmt.Sprint(p.named.sans) != "[10.0.0.5 worker-1 w.example]" {
		t.Fatalf("named %v, bare %v, name asked %v", p.named.sans, p.bare.sans, p.nameInBundle)
	}
}

// TestRenewForNameSpacing: a heartbeat refused for want of the name makes
// the worker renew at once, and then at most every nameRenewalSpacing;
// other refusals never do.
func TestRenewForNameSpacing(t *testing.T) {
	clk := clock.NewFake(time.Now())
	c := &certController{cfg: &certs.MachineConfig{}, clock: clk, log: slog.New(slog.DiscardHandler)}
	ctx := context.Background()
	noName := status.Error(codes.PermissionDenied, "membership: entry not owned by the caller: the certificate does not name hostname worker-1")

	c.renewForName(ctx, status.Error(codes.PermissionDenied, "membership: entry not owned by the caller: the certificate does not name address 10.0.0.6"))

	if !c.lastNameRenewal.IsZero() {
		t.Fatal("renewed for another refusal")
	}

	c.renewForName(ctx, noName)
	first := c.lastNameRenewal

	if first.IsZero() {
		t.Fatal("not renewed for want of the name")
	}

	clk.Advance(nameRenewalSpacing - time.Second)
	c.renewForName(ctx, noName)

	if !c.lastNameRenewal.Equal(first) {
		t.Fatal("renewed again within the spacing")
	}

	clk.Advance(time.Second)
	c.renewForName(ctx, noName)

	if c.lastNameRenewal.Equal(first) {
		t.Fatal("not renewed after the spacing")
	}
}
