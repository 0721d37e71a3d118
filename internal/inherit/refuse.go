package inherit

import (
	"errors"
	"net"
	"os"
	"time"
)

// socket is one held listening socket, with how many processes have it
// now and, while none does, the refusal of its clients.
type socket struct {
	l *net.TCPListener
	// users counts the processes given a copy (Source.File) that have
	// not ended (Source.Release).
	users int
	// hold starts refusing once HoldFor has passed with no user; nil when
	// not pending.
	hold *time.Timer
	// holds counts the holds armed, so that a hold's callback that lost
	// the race with its Stop knows it is not the pending one.
	holds uint64
	// refused is closed when the goroutine refusing clients has ended;
	// nil while none runs.
	refused chan struct{}
}

// idleLocked arms the refusal of sock's clients after HoldFor if no
// process has it. Called with s.mu held.
func (s *Set) idleLocked(addr string, sock *socket) {
	if sock.users > 0 || sock.hold != nil || sock.refused != nil || s.passed {
		return
	}

	hold := s.HoldFor
	if hold <= 0 {
		hold = DefaultHoldFor
	}

	sock.holds++
	n := sock.holds
	sock.hold = time.AfterFunc(hold, func() { s.startRefusing(addr, sock, n) })
}

// startRefusing refuses sock's clients until a process is given it, if
// it is still held, by no process, and hold n is still its pending one.
func (s *Set) startRefusing(addr string, sock *socket, n uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()

	if s.held[addr] != sock || sock.hold == nil || sock.holds != n || sock.users > 0 || s.passed {
		return // given out, closed or passed on meanwhile
	}

	sock.hold = nil
	sock.refused = make(chan struct{})

	go refuse(sock.l, sock.refused)
}

// stopRefusing ends sock's refusal, or its pending start, and returns
// once nothing accepts on it. Called with the Set's lock held.
func (sock *socket) stopRefusing() {
	if sock.hold != nil {
		sock.hold.Stop()
		sock.hold = nil
	}

	if sock.refused == nil {
		return
	}

	// A deadline in the past ends the pending Accept. It is the
	// descriptor's own in Go's poller: the copies processes get have none.
	_ = sock.l.SetDeadline(time.Now()) //nolint:errcheck // a closed socket accepts nothing either
	<-sock.refused
	_ = sock.l.SetDeadline(time.Time{}) //nolint:errcheck // as above

	sock.refused = nil
}

// refuse accepts every connection on l and resets it at once, as a port
// nobody listens on refuses it, until l's deadline passes or l is closed;
// it closes done when it returns.
func refuse(l *net.TCPListener, done chan<- struct{}) {
	defer close(done)

	for {
		c, err := l.AcceptTCP()

		switch {
		case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, net.ErrClosed):
			return
		case err != nil:
			// Out of descriptors, say: the clients wait in the backlog
			// meanwhile, as they did before the refusal.
			time.Sleep(refuseRetry)

			continue
		}

		_ = c.SetLinger(0) //nolint:errcheck // a plain close refuses too
		c.Close()          //nolint:errcheck // refused
	}
}

// refuseRetry paces the refusal after an error of Accept other than its
// end.
const refuseRetry = 50 * time.Millisecond
