package revocation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/revocations"
	"github.com/aegis-os/aegis/internal/backoff"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/logkey"
)

// errNoWatch is WatchOnce's answer when no control plane watched and at
// least one refused to (Unimplemented: older than this node; or
// ResourceExhausted: its watchers are full): the list is polled meanwhile.
var errNoWatch = errors.New("revocation: no control plane serves a watch of the list")

// Watcher keeps a worker's list in step with the control planes': it holds
// a NodeRevocationService Watch stream on one control plane's trustd, over
// the connection its trustdclient keeps, and applies each list the stream
// brings. A stream that breaks is opened again on the next endpoint, from
// the revision the worker has, so nothing is missed and nothing is sent
// again, after a jittered wait of at most WatchMoveSpread when the
// control plane had accepted the stream (see WatchMoveSpread); when every
// endpoint fails it waits (WatchBackoffMin to WatchBackoffMax) and tries
// again. Where no control plane serves Watch (a
// cluster mid-upgrade) it polls, as a Poller, for WatchRetry at a time.
// It fails safe like the Poller, with which it shares the reachability it
// logs: while no control plane answers the list stays as it was.
type Watcher struct {
	p       *Poller
	backoff backoff.Backoff
}

// NewWatcher returns a Watcher; Run starts it.
func NewWatcher(cfg PollerConfig) (*Watcher, error) {
	p, err := NewPoller(cfg)
	if err != nil {
		return nil, err
	}

	return &Watcher{p: p, backoff: backoff.Backoff{Min: WatchBackoffMin, Max: WatchBackoffMax, Rand: p.cfg.Rand}}, nil
}

// Run watches until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	for ctx.Err() == nil {
		err := w.WatchOnce(ctx)

		switch {
		case err == nil:
			w.backoff.Reset()
		case errors.Is(err, errNoWatch):
			w.pollFor(ctx)
		case isLost(err):
			if !clock.Sleep(ctx, w.p.cfg.Clock, backoff.Jitter(w.p.cfg.Rand, WatchMoveSpread)) {
				return
			}
		default:
			if !clock.Sleep(ctx, w.p.cfg.Clock, w.backoff.Next()) {
				return
			}
		}
	}
}

// pollFor polls every PollInterval for WatchRetry, then returns so that
// Run tries to watch again: the control planes may have been upgraded.
func (w *Watcher) pollFor(ctx context.Context) {
	for range WatchRetry / PollInterval {
		w.p.PollOnce(ctx)

		if !clock.Sleep(ctx, w.p.cfg.Clock, PollInterval) {
			return
		}
	}
}

// WatchOnce holds one watch, on the endpoints in turn, until a stream ends
// cleanly (nil: open the next at once), one that its control plane had
// accepted breaks (a lostError), every endpoint failed, or ctx ends.
func (w *Watcher) WatchOnce(ctx context.Context) error {
	refused := false

	_, err := w.p.cfg.Trustd.Call(ctx, func(ctx context.Context, conn grpc.ClientConnInterface) error {
		err := w.stream(ctx, conn)
		if c := status.Code(err); c == codes.Unimplemented || c == codes.ResourceExhausted {
			refused = true
		}

		return err
	})

	switch {
	case err == nil || ctx.Err() != nil:
		return nil
	case refused:
		return fmt.Errorf("%w: %w", errNoWatch, err)
	case isLost(err):
		// The others may well answer: nothing to log yet.
		return err
	}

	w.p.unreachable(ctx, err)

	return err
}

// stream opens a watch on conn from the list's revision and applies what
// it brings until it ends: nil when the control plane ended it cleanly,
// and a lostError when it broke after the control plane had accepted it.
func (w *Watcher) stream(ctx context.Context, conn grpc.ClientConnInterface) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	st, err := revocations.NewNodeRevocationServiceClient(conn).Watch(ctx, &revocations.WatchRequest{Revision: w.p.cfg.List.Revision()})
	if err != nil {
		return err
	}

	// trustd sends its headers once it has accepted the watch; a stream
	// refused at once has none, and Recv gives the refusal.
	md, _ := st.Header()
	if md != nil {
		w.p.reachable(target(conn))
	}

	for {
		resp, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}

		if err != nil && md != nil && ctx.Err() == nil {
			return lostError{err: err}
		}

		if err != nil {
			return err
		}

		w.backoff.Reset()

		entries, err := fromWire(resp.GetRevocations())
		if err != nil {
			return err
		}

		w.p.apply(entries, resp.GetRevision())
	}
}

// lostError is the end of a watch that its control plane had accepted and
// then lost. It says so to the trustd client (EndpointLost, as
// trustdclient.Lost asks), which then returns instead of trying the next
// endpoint: the Watcher waits a jittered moment first (WatchMoveSpread).
type lostError struct{ err error }

func (e lostError) Error() string    { return "revocation: watch lost: " + e.err.Error() }
func (e lostError) Unwrap() error    { return e.err }
func (lostError) EndpointLost() bool { return true }

// isLost reports whether err is, or wraps, a lostError.
func isLost(err error) bool {
	var l lostError

	return errors.As(err, &l)
}

// target names the endpoint of conn in the log.
func target(conn grpc.ClientConnInterface) string {
	if t, ok := conn.(interface{ Target() string }); ok {
		return t.Target()
	}

	return ""
}

// reachable logs, once, that a control plane answers again.
func (p *Poller) reachable(endpoint string) {
	if p.down {
		p.down = false
		p.cfg.Logger.Info("revocation list reachable again", slog.String(logkey.Endpoint, endpoint))
	}
}

// unreachable logs, once, that no control plane answers.
func (p *Poller) unreachable(ctx context.Context, err error) {
	if !p.down && ctx.Err() == nil {
		p.down = true
		p.cfg.Logger.Warn("no control plane answered for the revocation list; enforcing the last one",
			slog.String(logkey.Error, err.Error()))
	}
}
