package reclaim

import "testing"

func TestFreesOncePerBurst(t *testing.T) {
	freed := make(chan struct{}, 10)
	tr := &Tracker{threshold: 100, free: func() { freed <- struct{}{} }, after: func(f func()) { f() }}

	steps := []struct {
		open  int
		frees int
	}{
		{50, 0}, {10, 0}, // under the threshold: nothing to give back
		{100, 0}, {30, 0}, // above a quarter of the peak
		{25, 1}, // the burst has ended
		{0, 0},  // and is not freed twice
		{400, 0}, {99, 1},
	}

	for i, s := range steps {
		tr.Observe(s.open)

		if len(freed) != s.frees {
			t.Fatalf("step %d (%d open): freed %d times, want %d", i, s.open, len(freed), s.frees)
		}

		for range s.frees {
			<-freed
		}
	}
}
