package health

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
)

// TestRunReportsOnlyChanges: results healthy, healthy, failing, failing
// (same message), healthy give three changes.
func TestRunReportsOnlyChanges(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	results := []error{nil, nil, errors.New("port closed"), errors.New("port closed"), nil}

	var calls atomic.Int32

	check := func(context.Context) error {
		i := calls.Add(1) - 1
		if int(i) >= len(results) {
			return nil
		}

		return results[i]
	}

	changes := make(chan Status, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})

	go func() {
		Run(ctx, clk, Settings{InitialDelay: time.Second, Period: 5 * time.Second}, check, func(s Status) { changes <- s })
		close(done)
	}()

	for range results {
		if err := clk.WaitForTimers(ctx, 1); err != nil {
			t.Fatal(err)
		}

		clk.Advance(5 * time.Second)
	}

	var got []string

	for len(got) < 3 {
		select {
		case s := <-changes:
			if s.Unknown {
				t.Fatal("a reported status is unknown")
			}

			got = append(got, map[bool]string{true: "ok", false: "fail:" + s.LastMessage}[s.Healthy])
		case <-time.After(10 * time.Second):
			t.Fatalf("changes so far: %v", got)
		}
	}

	want := []string{"ok", "fail:port closed", "ok"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("changes = %v, want %v", got, want)
		}
	}

	cancel()
	<-done

	select {
	case s := <-changes:
		t.Fatalf("extra change %+v", s)
	default:
	}
}

func TestSlowCheckTimesOut(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	changes := make(chan Status, 1)
	ctx, cancel := context.WithCancel(context.Background())

	defer cancel()

	go Run(ctx, clk, Settings{Timeout: 50 * time.Millisecond}, func(ctx context.Context) error {
		<-ctx.Done()

		return ctx.Err()
	}, func(s Status) { changes <- s })

	if err := clk.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}

	clk.Advance(time.Second)

	select {
	case s := <-changes:
		if s.Healthy {
			t.Fatal("hung check reported healthy")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("hung check never timed out")
	}
}

// TestStartPeriodUntilFirstHealthy: until the first healthy result the
// checks come every StartPeriod, then every Period; a service that stays
// unhealthy for the whole StartWindow is asked every Period from then on.
func TestStartPeriodUntilFirstHealthy(t *testing.T) {
	for _, tt := range []struct {
		name    string
		healthy int32 // the check passes from this call on; 0 never
		// waits between the first six checks
		want []time.Duration
	}{
		{"healthy at the third check", 3, []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 5 * time.Second, 5 * time.Second, 5 * time.Second}},
		{"never healthy", 0, []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond, 5 * time.Second, 5 * time.Second}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(0, 0))

			var calls atomic.Int32

			check := func(context.Context) error {
				if n := calls.Add(1); tt.healthy != 0 && n >= tt.healthy {
					return nil
				}

				return errors.New("not yet")
			}

			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})

			go func() {
				Run(ctx, clk, Settings{InitialDelay: time.Second, Period: 5 * time.Second, StartWindow: 250 * time.Millisecond}, check, func(Status) {})
				close(done)
			}()

			t.Cleanup(func() { cancel(); <-done })

			if err := clk.WaitForTimers(ctx, 1); err != nil {
				t.Fatal(err)
			}

			clk.Advance(time.Second)

			for i, want := range tt.want {
				if err := clk.WaitForTimers(ctx, 1); err != nil {
					t.Fatal(err)
				}

				before := calls.Load()

				clk.Advance(want - time.Millisecond)
				time.Sleep(5 * time.Millisecond)

				if calls.Load() != before {
					t.Fatalf("wait %d: a check before %s", i, want)
				}

				clk.Advance(time.Millisecond)

				for deadline := time.Now().Add(5 * time.Second); calls.Load() == before; time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("wait %d: no check %s after the last", i, want)
					}
				}
			}
		})
	}
}
