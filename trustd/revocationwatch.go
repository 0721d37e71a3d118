package trustd

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/aegis-os/aegis/api/revocations"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/source"
)

// watchMethod is the one streaming call trustd serves.
var watchMethod = revocations.NodeRevocationService_Watch_FullMethodName

// errTooManyWatchers refuses a Watch past MaxRevocationWatchers, or past
// MaxRevocationWatchersPerSource for one source.
var errTooManyWatchers = errors.New("trustd: too many revocation watchers; poll Serials or watch another control plane")

// errStopping ends the watches of a trustd that stops: Unavailable, so
// their nodes watch another control plane at once.
var errStopping = errors.New("trustd: stopping; watch another control plane")

// watchers counts the open Watch streams, in all and per source address.
type watchers struct {
	mu       sync.Mutex
	total    int
	bySource map[netip.Addr]int
}

// admit counts one more stream from src, or refuses it past the bounds;
// release must follow an admitted stream.
func (w *watchers) admit(src netip.Addr) bool {
	w.mu.Lock()
	defer w.mu.Unlock()

	if w.total >= MaxRevocationWatchers || w.bySource[src] >= MaxRevocationWatchersPerSource {
		return false
	}

	if w.bySource == nil {
		w.bySource = map[netip.Addr]int{}
	}

	w.total++
	w.bySource[src]++

	return true
}

func (w *watchers) release(src netip.Addr) {
	w.mu.Lock()
	defer w.mu.Unlock()

	w.total--
	if w.bySource[src]--; w.bySource[src] <= 0 {
		delete(w.bySource, src)
	}
}

// Watch sends the list to a caller with a node certificate: at once when
// the caller's revision is zero or older than the feed's, then at every
// change of the feed to a newer revision. A watcher holds no queue: it
// sends the feed's current snapshot, so one slow to read skips the lists
// replaced meanwhile. The stream ends cleanly at the caller's certificate
// expiry or after WatchLifetime, whichever comes first; with Unavailable
// when trustd stops; and when a check
// before a send finds the certificate no longer a node's (a CA dropped):
// the caller opens another, on a connection with its current certificate,
// from the revision it has.
func (r revocationService) Watch(req *revocations.WatchRequest, stream grpc.ServerStreamingServer[revocations.WatchResponse]) error {
	ctx := stream.Context()
	src := sourceOf(ctx)

	cert, err := r.s.nodeCertificate(ctx)
	if err != nil {
		r.s.refusals.Refuse(ctx, source.Key(src), "revocations", msgRevocationsRefused,
			slog.String(logkey.Source, src.String()), slog.String(logkey.Error, err.Error()))

		return toStatus(errNotANode, "")
	}

	if !r.s.watchers.admit(src) {
		r.s.refusals.Refuse(ctx, source.Key(src), "revocations", msgRevocationsRefused,
			slog.String(logkey.Source, src.String()), slog.String(logkey.Error, errTooManyWatchers.Error()))

		return toStatus(errTooManyWatchers, "")
	}
	defer r.s.watchers.release(src)

	// The headers tell the node its watch is accepted, before any list.
	if err := stream.SendHeader(metadata.MD{}); err != nil {
		return fmt.Errorf("trustd: revocation watch: %w", err)
	}

	end := r.s.cfg.Clock.NewTimer(min(WatchLifetime, cert.NotAfter.Sub(r.s.cfg.Clock.Now())))
	defer end.Stop()

	return r.follow(stream, req.GetRevision(), end.C())
}

// follow sends the feed's snapshots newer than sent until end fires or the
// caller leaves. A snapshot at revision zero (a control plane that has not
// read etcd since it started) is sent at every change: without a revision
// to compare, a change is all there is to go by.
func (r revocationService) follow(stream grpc.ServerStreamingServer[revocations.WatchResponse], sent int64, end <-chan time.Time) error {
	ctx := stream.Context()
	first, changed := sent == 0, false

	for {
		snap := r.s.cfg.Revocations.Snapshot()

		if first || snap.Revision > sent || changed && snap.Revision == 0 {
			if err := r.s.checkNode(ctx); err != nil {
				return toStatus(errNotANode, "")
			}

			if err := stream.Send(&revocations.WatchResponse{Revision: snap.Revision, Revocations: snap.List}); err != nil {
				return fmt.Errorf("trustd: revocation watch: %w", err)
			}

			first, sent = false, snap.Revision
		}

		select {
		case <-snap.Changed:
			changed = true
		case <-end:
			return nil
		case <-r.s.stopping:
			return toStatus(errStopping, "")
		case <-ctx.Done():
			return nil
		}
	}
}
