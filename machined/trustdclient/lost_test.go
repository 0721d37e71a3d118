package trustdclient

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/internal/clock"
)

// lostErr is a call's end that says its endpoint was lost (Lost).
type lostErr struct{ error }

func (lostErr) EndpointLost() bool { return true }
func (e lostErr) Unwrap() error    { return e.error }

// TestLostEndpointEndsTheCall: a call that its endpoint accepted and then
// lost (Lost) is not run on the next endpoint: Call returns its error at
// once, so that the caller picks the moment it goes on; the endpoint lost
// goes after the others from the next call on.
func TestLostEndpointEndsTheCall(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	c, fake := fakeClient(t, clk, "10.5.0.2:50001", "10.5.0.3:50001", "10.5.0.4:50001")
	preferred := c.Preferred()
	broken := errors.New("rpc error: code = Unavailable desc = error reading from server: EOF")

	lost := func(ctx context.Context, conn grpc.ClientConnInterface) error {
		if err := fake.call(ctx, conn); err != nil {
			return err
		}

		return fmt.Errorf("watch: %w", lostErr{broken})
	}

	_, err := c.Call(ctx, lost)
	if !IsLost(err) || !errors.Is(err, broken) {
		t.Fatalf("Call of a stream lost on %s: %v, want the lost stream's error", preferred, err)
	}

	if tried := fake.reset(); !slices.Equal(tried, []string{preferred}) {
		t.Fatalf("a call lost on %s went on to %v, want it to stop there", preferred, tried)
	}

	got, err := c.Call(ctx, fake.call)
	if err != nil || got == preferred {
		t.Fatalf("the call after the loss answered by %q (%v), want another endpoint than %s", got, err, preferred)
	}

	if tried := fake.reset(); !slices.Equal(tried, []string{got}) {
		t.Fatalf("the call after the loss tried %v, want %s alone (the lost one goes last)", tried, got)
	}
}
