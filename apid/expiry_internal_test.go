package apid

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
)

// waitEnded waits for ctx to end and returns the status the call ends with.
func waitEnded(t *testing.T, ctx context.Context) error {
	t.Helper()

	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
		t.Fatal("the call was not ended")
	}

	return (&Server{}).toStatus("", ended(ctx, status.Error(codes.Canceled, "context canceled")))
}

func notEnded(t *testing.T, ctx context.Context) {
	t.Helper()

	if err := ctx.Err(); err != nil {
		t.Fatalf("the call was ended: %v", context.Cause(ctx))
	}
}

func TestStreamEndsWhenCertificateExpires(t *testing.T) {
	const life = time.Hour

	for _, earlierSecond := range []bool{false, true} {
		name := "the only stream"
		if earlierSecond {
			name = "opened after a longer-lived one"
		}

		t.Run(name, func(t *testing.T) {
			gt := newGuardTest(t)
			gt.g.interval = 24 * time.Hour // expiry alone, no periodic sweep

			var long context.Context

			if earlierSecond {
				var release func()

				ctx, release, err := gt.g.admit(call(t, gt.chain(t, 3*life), 1, false), "/m", 1)
				if err != nil {
					t.Fatal(err)
				}
				defer release()

				long = ctx

				if err := gt.clk.WaitForTimers(ctx, 1); err != nil {
					t.Fatal(err)
				}
			}

			chain := gt.chain(t, life)

			ctx, release, err := gt.g.admit(call(t, chain, 2, false), machine.MachineService_Events_FullMethodName, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer release()

			if err := gt.clk.WaitForTimers(ctx, 1); err != nil {
				t.Fatal(err)
			}

			gt.clk.Set(chain[0].NotAfter.Add(-time.Second))
			notEnded(t, ctx)

			gt.clk.Set(chain[0].NotAfter.Add(time.Second))

			st := waitEnded(t, ctx)
			want := "apid: stream ended: a certificate of the client's chain is not valid now: the client certificate expired at " +
				chain[0].NotAfter.UTC().Format(time.RFC3339)

			if status.Code(st) != codes.Unauthenticated || status.Convert(st).Message() != want {
				t.Fatalf("ended with %v, want Unauthenticated %q", st, want)
			}

			if long != nil {
				notEnded(t, long)
			}
		})
	}
}

func TestStreamEndsWhenItsCAIsNoLongerAccepted(t *testing.T) {
	gt := newGuardTest(t)

	ctx, release, err := gt.g.admit(call(t, gt.chain(t, time.Hour), 1, false), machine.MachineService_Logs_FullMethodName, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	if err := gt.clk.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}

	// A rotation's last step: only a new CA is accepted.
	newCA := catest.NewCA(t, ca.Ed25519, gt.clk.Now().Add(-time.Hour))

	set, err := ca.NewAcceptedSet(gt.clk.Now(), newCA.Cert)
	if err != nil {
		t.Fatal(err)
	}

	gt.accepted.Store(set)
	gt.clk.Advance(StreamRecheckInterval / 2)
	notEnded(t, ctx)
	gt.clk.Advance(StreamRecheckInterval)

	st := waitEnded(t, ctx)
	if status.Code(st) != codes.Unauthenticated || !strings.Contains(st.Error(), "CA is no longer accepted") {
		t.Fatalf("ended with %v, want Unauthenticated naming the CA", st)
	}
}

// TestWatcherStopsWithTheLastStream: with no call open, no goroutine and
// no timer is left; the next call starts the watch again.
func TestWatcherStopsWithTheLastStream(t *testing.T) {
	gt := newGuardTest(t)

	for range 2 {
		_, release, err := gt.g.admit(call(t, gt.chain(t, time.Hour), 1, false), "/m", 1)
		if err != nil {
			t.Fatal(err)
		}

		if err := gt.clk.WaitForTimers(context.Background(), 1); err != nil {
			t.Fatal(err)
		}

		release()
		gt.clk.Advance(StreamRecheckInterval + time.Second)

		for watching := true; watching; {
			gt.g.mu.Lock()
			watching = gt.g.watching
			gt.g.mu.Unlock()

			if watching {
				// The watcher's last sweep runs on its own goroutine.
				runtime.Gosched()
			}
		}

		if n := gt.clk.Pending(); n != 0 {
			t.Fatalf("%d timers pending with no call open", n)
		}
	}
}
