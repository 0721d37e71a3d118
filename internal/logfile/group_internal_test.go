package logfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// fakeSync stands for the disk: a sync makes durable what the file held
// when it began, and the first sync waits for the test's release.
type fakeSync struct {
	mu      sync.Mutex
	durable [][]byte // what a file held at the start of each sync that ended
	started chan struct{}
	release chan struct{}
	first   sync.Once
	fail    error
}

func newFakeSync() *fakeSync {
	return &fakeSync{started: make(chan struct{}), release: make(chan struct{})}
}

func (s *fakeSync) sync(f *os.File) error {
	held, err := os.ReadFile(f.Name())
	if err != nil {
		return err
	}

	s.first.Do(func() {
		close(s.started)
		<-s.release
	})

	s.mu.Lock()
	defer s.mu.Unlock()

	if s.fail != nil {
		return s.fail
	}

	s.durable = append(s.durable, held)

	return nil
}

func (s *fakeSync) isDurable(rec []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()

	for _, d := range s.durable {
		if bytes.Contains(d, rec) {
			return true
		}
	}

	return false
}

func openFake(t *testing.T, s *fakeSync, maxSize int64) *File {
	t.Helper()

	l, err := open(filepath.Join(t.TempDir(), "audit.log"), maxSize, 1, newGroupCommit(s.sync))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { l.Close() })

	return l
}

// waitForSize returns once the file holds size bytes: the writes the test
// started have reached it.
func waitForSize(l *File, size int64) {
	for {
		l.mu.Lock()
		n := l.size
		l.mu.Unlock()

		if n == size {
			return
		}

		runtime.Gosched()
	}
}

func writeCommit(l *File, rec []byte) error {
	if _, err := l.Write(rec); err != nil {
		return err
	}

	return l.Commit()
}

// TestGroupCommit: a write returns only once a sync that began after it
// has ended, and the writers that wait while a sync runs share the next
// one: 1 + 15 writes, two syncs.
func TestGroupCommit(t *testing.T) {
	s := newFakeSync()
	l := openFake(t, s, 1<<20)

	record := func(i int) []byte { return fmt.Appendf(nil, "record %02d\n", i) }
	write := func(i int, errs chan<- error) {
		if err := writeCommit(l, record(i)); err != nil {
			errs <- err

			return
		}

		if !s.isDurable(record(i)) {
			errs <- fmt.Errorf("write %d returned before its record was synced", i)

			return
		}

		errs <- nil
	}

	errs := make(chan error, 16)

	go write(0, errs)
	<-s.started

	// The first sync is held; these writes land behind it.
	for i := 1; i < 16; i++ {
		go write(i, errs)
	}

	waitForSize(l, 16*int64(len(record(0))))

	select {
	case err := <-errs:
		t.Fatalf("a write returned while the sync it needs was held: %v", err)
	default:
	}

	close(s.release)

	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}

	l.mu.Lock()
	defer l.mu.Unlock()

	if l.group.syncs != 2 {
		t.Fatalf("%d syncs for 16 writes in two groups, want 2", l.group.syncs)
	}
}

// TestGroupCommitError: the writers a failed sync covered get its error.
func TestGroupCommitError(t *testing.T) {
	s := newFakeSync()
	s.fail = errors.New("disk gone")
	close(s.release)

	l := openFake(t, s, 1<<20)

	if err := writeCommit(l, []byte("record\n")); !errors.Is(err, s.fail) {
		t.Fatalf("write after a failed sync: %v", err)
	}
}

// TestGroupCommitRotation: a record waiting for a sync when the next
// write rotates the file is synced in the file it went to, before that
// file is closed.
func TestGroupCommitRotation(t *testing.T) {
	s := newFakeSync()
	l := openFake(t, s, 30)

	recs := []string{"first  record\n", "second record\n", "third  record\n"}
	errs := make(chan error, len(recs))
	write := func(rec string) {
		err := writeCommit(l, []byte(rec))
		if err == nil && !s.isDurable([]byte(rec)) {
			err = fmt.Errorf("%q returned unsynced", rec)
		}

		errs <- err
	}

	go write(recs[0])
	<-s.started

	// The second record waits behind the held sync; the third needs a
	// rotation, which waits for that sync to end.
	go write(recs[1])

	waitForSize(l, 28)

	go write(recs[2])
	close(s.release)

	for range recs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}

	if got, _ := os.ReadFile(l.name(1)); string(got) != recs[0]+recs[1] {
		t.Fatalf("rotated file holds %q", got)
	}
}

// TestCommitAfterRotation: a record written, then rotated out by another
// write before its writer called Commit, is on disk when Commit returns.
func TestCommitAfterRotation(t *testing.T) {
	s := newFakeSync()
	close(s.release)

	l := openFake(t, s, 20)

	first, second := []byte("first  record\n"), []byte("second record\n")
	for _, rec := range [][]byte{first, second} {
		if _, err := l.Write(rec); err != nil {
			t.Fatal(err)
		}
	}

	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}

	for _, rec := range [][]byte{first, second} {
		if !s.isDurable(rec) {
			t.Fatalf("%q not synced", rec)
		}
	}
}

// BenchmarkCommit writes and commits a 320-byte record (the size of an
// issuance record) from 1, 8 and 32 writers at once, with the real sync,
// and reports how many records one sync covered.
func BenchmarkCommit(b *testing.B) {
	rec := append(bytes.Repeat([]byte("x"), 319), '\n')

	for _, writers := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("%d-writers", writers), func(b *testing.B) {
			l, err := Open(filepath.Join(b.TempDir(), "audit.log"), 1<<30, 1)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()

			var wg sync.WaitGroup

			b.ResetTimer()

			for w := range writers {
				wg.Go(func() {
					for range b.N/writers + min(1, max(0, b.N%writers-w)) {
						if err := writeCommit(l, rec); err != nil {
							b.Error(err)

							return
						}
					}
				})
			}

			wg.Wait()
			b.StopTimer()

			l.mu.Lock()
			syncs := l.group.syncs
			l.mu.Unlock()

			b.ReportMetric(float64(b.N)/float64(max(syncs, 1)), "records/sync")
		})
	}
}
