package apid

import (
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/aegis-os/aegis/internal/logkey"
)

// credentialEnded is the cause of a call the guard ended: its reason says
// why the client's credential is no longer valid.
type credentialEnded struct{ reason error }

func (e *credentialEnded) Error() string {
	return "apid: stream ended: " + strings.TrimPrefix(e.reason.Error(), "apid: ")
}

func (e *credentialEnded) Unwrap() error { return e.reason }

// errStopping is the cause of a streaming call that Shutdown ended once
// StreamStopGrace was over: the client may call again, and reaches the
// node's next apid.
var errStopping = errors.New("apid: the node's API is stopping or restarting; call again")

// isCredentialEnded reports whether err is the guard's ending of a call.
func isCredentialEnded(err error) bool {
	var e *credentialEnded

	return errors.As(err, &e)
}

// watchLocked makes sure the watcher runs and will look at a call whose
// chain expires at notAfter in time.
func (g *streamGuard) watchLocked(notAfter time.Time) {
	if !g.watching {
		g.watching = true
		g.armed = time.Time{}

		go g.watch()

		return
	}

	if !g.armed.IsZero() && notAfter.Before(g.armed) {
		select {
		case g.wake <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// watch sweeps the open calls at the earliest expiry among them, or every
// interval for a change of the accepted CAs, until none is left or the
// guard is stopped.
func (g *streamGuard) watch() {
	for {
		wait, ok := g.sweep()
		if !ok {
			return
		}

		t := g.clock.NewTimer(wait)

		select {
		case <-t.C():
		case <-g.wake:
			t.Stop()
		case <-g.done:
			t.Stop()

			return
		}
	}
}

// sweep ends every open call whose chain is no longer valid and returns
// how long to wait until the next sweep. ok is false when no call is left
// to watch: the watcher then exits, and the next admitted call starts one.
func (g *streamGuard) sweep() (wait time.Duration, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()

	now := g.clock.Now()
	next := now.Add(g.interval)
	live := 0

	for st := range g.open {
		if st.ended {
			continue
		}

		if err := g.check(st.chain); err != nil {
			g.endLocked(st, err)

			continue
		}

		live++

		if st.notAfter.Before(next) {
			next = st.notAfter
		}
	}

	if live == 0 {
		g.watching, g.armed = false, time.Time{}

		return 0, false
	}

	g.armed = next

	// A certificate is valid through its NotAfter: wake just past it.
	return next.Sub(now) + time.Nanosecond, true
}

// endLocked ends st's call with the reason its chain failed the check.
func (g *streamGuard) endLocked(st *openStream, reason error) {
	st.ended = true
	cause := &credentialEnded{reason: reason}

	g.log.Warn("stream ended: credential no longer valid", slog.String(logkey.Method, st.method),
		slog.String(logkey.Subject, st.chain[0].Subject.String()), slog.String(logkey.Error, cause.Error()))
	st.end(cause)
}

// recheckNow makes the watcher check every open call at once (the
// revocation list changed). With no call open there is nothing to check.
func (g *streamGuard) recheckNow() {
	g.mu.Lock()
	defer g.mu.Unlock()

	if !g.watching {
		return
	}

	select {
	case g.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// endStreams ends every open call that is not unary with errStopping.
func (g *streamGuard) endStreams() {
	g.mu.Lock()
	defer g.mu.Unlock()

	for st := range g.open {
		if st.ended || isUnary(st.method) {
			continue
		}

		st.ended = true
		st.end(errStopping)
	}
}

// stop ends the watcher; the calls themselves end with the server.
func (g *streamGuard) stop() {
	g.stopOnce.Do(func() { close(g.done) })
}
