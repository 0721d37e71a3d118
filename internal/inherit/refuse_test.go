package inherit

import (
	"errors"
	"net"
	"os"
	"strconv"
	"testing"
	"time"
)

// testHold is the tests' HoldFor.
const testHold = 600 * time.Millisecond

// waits reports whether a client connecting to addr is kept waiting (its
// connection open, nothing read) for a third of testHold, rather than
// refused.
func waits(t *testing.T, addr string) bool {
	t.Helper()

	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()

	_ = c.SetReadDeadline(time.Now().Add(testHold / 3))

	_, err = c.Read(make([]byte, 1))

	return errors.Is(err, os.ErrDeadlineExceeded)
}

// given opens the socket of a fresh Set through its Source, as a start
// does, and returns the source, its address and the Set.
func given(t *testing.T) (Source, string, *Set) {
	t.Helper()

	s := &Set{HoldFor: testHold}
	t.Cleanup(s.Close)

	src := s.Source("127.0.0.1:0")

	f, err := src.File()
	if err != nil {
		t.Fatal(err)
	}

	f.Close() // the process's copy: it accepts nothing in these tests

	l, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	return src, l.Addr().String(), s
}

// A held socket keeps its clients waiting while a process has it, and
// for HoldFor after the process ended; then it refuses them, until a
// process is given it again.
func TestHeldSocketRefusesWhenNobodyComes(t *testing.T) {
	src, addr, _ := given(t)

	if !waits(t, addr) {
		t.Fatal("a client was refused while a process had the socket")
	}

	src.Release()

	if !waits(t, addr) {
		t.Fatal("a client was refused at once after the process ended, want it kept waiting for HoldFor")
	}

	time.Sleep(2 * testHold)

	if waits(t, addr) {
		t.Fatalf("a client was kept waiting %s after the process ended, want it refused", 2*testHold)
	}

	f, err := src.File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	if !waits(t, addr) {
		t.Fatal("a client was refused after a process was given the socket again")
	}
}

// After PassOn the sockets belong to the next process: nothing refuses
// on them, however long no process has them.
func TestHeldSocketPassedOnNeverRefuses(t *testing.T) {
	src, addr, s := given(t)

	src.Release()

	if _, err := s.PassOn(); err != nil {
		t.Fatal(err)
	}

	time.Sleep(2 * testHold)

	if !waits(t, addr) {
		t.Fatal("a socket passed on refused a client")
	}
}

// An adopted socket refuses its clients when no process of this machined
// is given it within HoldFor.
func TestAdoptedSocketRefusesWhenNobodyComes(t *testing.T) {
	fd, addr := inherited(t)

	s := &Set{HoldFor: testHold}
	t.Cleanup(s.Close)

	if err := s.Adopt(strconv.Itoa(fd) + "=" + addr); err != nil {
		t.Fatal(err)
	}

	if !waits(t, addr) {
		t.Fatal("an adopted socket refused a client at once, want it kept waiting for HoldFor")
	}

	time.Sleep(2 * testHold)

	if waits(t, addr) {
		t.Fatal("an adopted socket no process was given kept a client waiting, want it refused")
	}
}
