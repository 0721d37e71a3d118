package gcroom

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/testutil"
)

const mib = 1 << 20

func TestPercent(t *testing.T) {
	for _, tt := range []struct {
		name        string
		held, room  uint64
		least, most int
		want        int
	}{
		{"nothing held yet", 0, 64 * mib, 10, 400, 400},
		{"little held: the most", 3 * mib, 64 * mib, 10, 400, 400},
		{"the room reached at the most", 16 * mib, 64 * mib, 10, 400, 400},
		{"more held: the room", 160 * mib, 64 * mib, 10, 400, 40},
		{"much held: the least", 1024 * mib, 64 * mib, 10, 400, 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percent(tt.held, tt.room, tt.least, tt.most); got != tt.want {
				t.Fatalf("Percent(%d MiB, %d MiB, %d, %d) = %d, want %d", tt.held/mib, tt.room/mib, tt.least, tt.most, got, tt.want)
			}
		})
	}
}

// TestRunFollowsWhatIsHeld: the percentage falls as the program holds
// more, rises as it holds less, is set only when it changes, and Run
// ends with its context.
func TestRunFollowsWhatIsHeld(t *testing.T) {
	clk := clock.NewFake(testutil.Epoch)

	var held atomic.Uint64

	held.Store(2 * mib)

	var (
		mu  sync.Mutex
		set []int
	)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})

	go func() {
		defer close(done)

		Run(ctx, Config{Percent: 400, Room: 64 * mib, Clock: clk, Held: held.Load, Set: func(p int) int {
			mu.Lock()
			defer mu.Unlock()

			set = append(set, p)

			return 0
		}})
	}()

	for _, h := range []uint64{2 * mib, 160 * mib, 160 * mib, 320 * mib, 8 * mib} {
		if err := clk.WaitForTimers(ctx, 1); err != nil {
			t.Fatal(err)
		}

		held.Store(h)
		clk.Advance(DefaultInterval)
	}

	if err := clk.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}

	cancel()

	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end with its context")
	}

	mu.Lock()
	defer mu.Unlock()

	if want := []int{400, 40, 20, 400}; !slices.Equal(set, want) {
		t.Fatalf("percentages set %v, want %v", set, want)
	}
}

// TestSampleCountsTheLiveHeap: what a program holds, read from the
// runtime, counts a large live allocation after a collection.
func TestSampleCountsTheLiveHeap(t *testing.T) {
	before := Sample()

	kept := make([]byte, 64*mib)
	for i := range kept {
		kept[i] = byte(i)
	}

	runtime.GC()

	if after := Sample(); after < before+60*mib {
		t.Errorf("held %d MiB with 64 MiB more live, %d MiB before", after/mib, before/mib)
	}

	runtime.KeepAlive(kept)
}

func TestRoomFor(t *testing.T) {
	for _, tt := range []struct {
		name            string
		floor, peak     uint64
		interval, every time.Duration
		want            uint64
	}{
		{"no pace: the floor", 32 * mib, 100 * mib, time.Second, 0, 32 * mib},
		{"at rest: the floor", 32 * mib, mib, time.Second, 10 * time.Second, 32 * mib},
		{"under load: what every allocates", 32 * mib, 20 * mib, time.Second, 10 * time.Second, 200 * mib},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := RoomFor(tt.floor, tt.peak, tt.interval, tt.every); got != tt.want {
				t.Fatalf("RoomFor = %d MiB, want %d MiB", got/mib, tt.want/mib)
			}
		})
	}
}

// TestRunFollowsTheLoad: while the program allocates fast, the room is what
// it allocates in Every, and the percentage rises; once it has allocated
// little for Every, the room falls back to the floor and the memory the
// load left is released, once.
func TestRunFollowsTheLoad(t *testing.T) {
	clk := clock.NewFake(testutil.Epoch)

	var allocated, released atomic.Uint64

	var (
		mu  sync.Mutex
		set []int
	)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})

	go func() {
		defer close(done)

		Run(ctx, Config{
			Percent: 400, Room: 32 * mib, Every: 4 * time.Second, Clock: clk,
			Held: func() uint64 { return 160 * mib }, Allocated: allocated.Load, Release: func() { released.Add(1) },
			Set: func(p int) int {
				mu.Lock()
				defer mu.Unlock()

				set = append(set, p)

				return 0
			},
		})
	}()

	// A MiB a second, then 20, then a MiB again for longer than Every.
	for _, rate := range []uint64{1, 1, 20, 20, 1, 1, 1, 1, 1} {
		if err := clk.WaitForTimers(ctx, 1); err != nil {
			t.Fatal(err)
		}

		allocated.Add(rate * mib)
		clk.Advance(DefaultInterval)
	}

	if err := clk.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}

	cancel()
	<-done

	mu.Lock()
	defer mu.Unlock()

	// 32 MiB of 160 held: 20 %; 80 MiB (20 MiB in a second, 4 s): 50 %.
	if want := []int{20, 50, 20}; !slices.Equal(set, want) {
		t.Fatalf("percentages set %v, want %v", set, want)
	}

	if got := released.Load(); got != 1 {
		t.Fatalf("memory released %d times, want once, as the load ended", got)
	}
}
