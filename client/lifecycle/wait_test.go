package lifecycle

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/internal/clock"
)

// TestRebootFollowsTheMachineStatus: a reboot is over only once the node,
// having left the running stage, is running and ready again in a newer
// status than the one recorded before; each stage is reported once.
func TestRebootFollowsTheMachineStatus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	st := state.WrapCore(namespaced.NewState(inmem.Build))

	ms := runtime.NewMachineStatus()
	ms.TypedSpec().Stage = runtime.MachineStageRunning
	ms.TypedSpec().Status.Ready = true

	if err := st.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}

	var (
		mu    sync.Mutex
		lines []string
		seen  = make(chan string, 16)
	)

	w := New(Options{
		Client: &client.Client{COSI: st}, Timeout: time.Minute, Clock: clock.NewFake(time.Now()),
		Progress: func(node, line string) {
			mu.Lock()
			lines = append(lines, node+"|"+line)
			mu.Unlock()
			seen <- line
		},
	})
	w.RecordBefore(ctx, nil)

	nextLine := func() string {
		t.Helper()

		select {
		case line := <-seen:
			return line
		case <-ctx.Done():
			t.Fatal("no progress")

			return ""
		}
	}

	done := make(chan []Failure, 1)

	go func() { done <- w.Run(ctx, nil) }()

	// The status of before is reported, but does not end the wait.
	if got := nextLine(); got != "running, ready" {
		t.Fatalf("first line %q", got)
	}

	update := func(stage runtime.MachineStage, ready bool, want string) {
		t.Helper()

		cur, err := st.Get(ctx, runtime.NewMachineStatus().Metadata())
		if err != nil {
			t.Fatal(err)
		}

		next := cur.(*runtime.MachineStatus).DeepCopy().(*runtime.MachineStatus) //nolint:forcetypeassert // the type stored
		next.TypedSpec().Stage = stage
		next.TypedSpec().Status.Ready = ready

		if err := st.Update(ctx, next); err != nil {
			t.Fatal(err)
		}

		if got := nextLine(); got != want {
			t.Fatalf("line %q, want %q", got, want)
		}
	}

	update(runtime.MachineStageRebooting, false, "rebooting, not ready")
	update(runtime.MachineStageRunning, true, "running, ready")

	if failed := <-done; len(failed) > 0 {
		t.Fatalf("failures %v", failed)
	}

	mu.Lock()
	defer mu.Unlock()

	if want := []string{"|running, ready", "|rebooting, not ready", "|running, ready"}; !slices.Equal(lines, want) {
		t.Fatalf("progress %q, want %q", lines, want)
	}
}

// TestWaitTimesOut: a node that never reboots is a failure naming what it
// last showed.
func TestWaitTimesOut(t *testing.T) {
	ctx := context.Background()
	st := state.WrapCore(namespaced.NewState(inmem.Build))

	ms := runtime.NewMachineStatus()
	ms.TypedSpec().Stage = runtime.MachineStageRunning
	ms.TypedSpec().Status.Ready = true

	if err := st.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}

	w := New(Options{Client: &client.Client{COSI: st}, Timeout: 50 * time.Millisecond})
	w.RecordBefore(ctx, []string{"10.0.0.5"})

	failed := w.Run(ctx, []string{"10.0.0.5"})
	if len(failed) != 1 || failed[0].Node != "10.0.0.5" || failed[0].Err.Error() != "not done within 50ms (last seen: running, ready)" {
		t.Fatalf("failures %v", failed)
	}
}

// goneState is a node's resource API whose watch never breaks (as the
// COSI client's retried watch of a node shut down), and whose reads fail
// Unavailable once the node is gone.
type goneState struct {
	state.State

	gone atomic.Bool
}

func (g *goneState) Get(ctx context.Context, md resource.Pointer, opts ...state.GetOption) (resource.Resource, error) {
	if g.gone.Load() {
		return nil, status.Error(codes.Unavailable, "node unreachable")
	}

	return g.State.Get(ctx, md, opts...)
}

// TestShutdownEndsOnceTheAPIIsGone: a shutdown's wait does not hang on a
// watch that never breaks: once the node has left the running stage, its
// API is asked every RetryInterval, and the wait is over ("down") when it
// no longer answers, not before.
func TestShutdownEndsOnceTheAPIIsGone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	st := &goneState{State: state.WrapCore(namespaced.NewState(inmem.Build))}

	ms := runtime.NewMachineStatus()
	ms.TypedSpec().Stage = runtime.MachineStageRunning
	ms.TypedSpec().Status.Ready = true

	if err := st.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}

	fake := clock.NewFake(time.Now())
	seen := make(chan string, 16)
	w := New(Options{
		Client: &client.Client{COSI: st}, Shutdown: true, Timeout: time.Minute, Clock: fake,
		Progress: func(_, line string) { seen <- line },
	})
	w.RecordBefore(ctx, nil)

	done := make(chan []Failure, 1)

	go func() { done <- w.Run(ctx, nil) }()

	want := func(line string) {
		t.Helper()

		select {
		case got := <-seen:
			if got != line {
				t.Fatalf("line %q, want %q", got, line)
			}
		case <-ctx.Done():
			t.Fatalf("no line, want %q", line)
		}
	}

	want("running, ready")

	next := ms.DeepCopy().(*runtime.MachineStatus) //nolint:forcetypeassert // the type copied
	next.TypedSpec().Stage = runtime.MachineStageShuttingDown
	next.TypedSpec().Status.Ready = false

	if err := st.Update(ctx, next); err != nil {
		t.Fatal(err)
	}

	want("shutting down, not ready")

	// Still answering: the wait goes on.
	if err := fake.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}

	fake.Advance(RetryInterval)

	if err := fake.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}

	select {
	case line := <-seen:
		t.Fatalf("line %q while the API still answers", line)
	case failed := <-done:
		t.Fatalf("the wait ended (%v) while the API still answers", failed)
	default:
	}

	st.gone.Store(true)
	fake.Advance(RetryInterval)

	want("down")

	if failed := <-done; len(failed) > 0 {
		t.Fatalf("failures %v", failed)
	}
}
