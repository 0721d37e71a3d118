package revocation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/api/revocations"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/logkey"
)

// Caller calls the control planes' trustd with the node certificate, one
// endpoint after the other until call succeeds, and returns the endpoint
// that answered (trustdclient.Client).
type Caller interface {
	Call(ctx context.Context, call func(context.Context, grpc.ClientConnInterface) error) (string, error)
}

// PollerConfig configures a Poller.
type PollerConfig struct {
	// Trustd reaches the control planes' trustd. Its owner closes it.
	// Required.
	Trustd Caller
	// List receives what a control plane answers. Required.
	List *List
	// Clock paces the polls. Nil means the system clock.
	Clock clock.Clock
	// Logger receives the changes of reachability. Nil discards.
	Logger *slog.Logger
	// Rand jitters a Watcher's waits. Nil means crypto/rand.
	Rand io.Reader
}

// Poller keeps a worker's list in step with the control planes': it asks
// their trustd every PollInterval, one endpoint after the other until one
// answers. It fails safe: while no control plane answers the list stays as
// it was (and on disk), so apid keeps refusing what it refused.
type Poller struct {
	cfg  PollerConfig
	down bool // no control plane answered at the last poll
}

// NewPoller returns a Poller; Run starts it.
func NewPoller(cfg PollerConfig) (*Poller, error) {
	if cfg.Trustd == nil || cfg.List == nil {
		return nil, errors.New("revocation: a poller needs a trustd client and a list")
	}

	cfg.Clock = defaults.Clock(cfg.Clock)
	cfg.Logger = defaults.Logger(cfg.Logger)
	cfg.Rand = defaults.Rand(cfg.Rand)

	return &Poller{cfg: cfg}, nil
}

// Run polls until ctx ends.
func (p *Poller) Run(ctx context.Context) {
	for {
		p.PollOnce(ctx)

		if !clock.Sleep(ctx, p.cfg.Clock, PollInterval) {
			return
		}
	}
}

// PollOnce asks the endpoints in turn until one answers, and makes its
// answer the list. It reports whether one answered.
func (p *Poller) PollOnce(ctx context.Context) bool {
	var entries []Entry

	endpoint, err := p.cfg.Trustd.Call(ctx, func(ctx context.Context, conn grpc.ClientConnInterface) error {
		var err error

		entries, err = ask(ctx, conn)

		return err
	})
	if err != nil {
		p.unreachable(ctx, err)

		return false
	}

	p.reachable(endpoint)
	p.apply(entries, 0)

	return true
}

// apply makes entries the list: at revision when it is not zero (a
// watch's), keeping the list's own otherwise (a poll's).
func (p *Poller) apply(entries []Entry, revision int64) {
	var (
		changed bool
		err     error
	)

	if revision != 0 {
		changed, err = p.cfg.List.ReplaceAt(entries, revision)
	} else {
		changed, err = p.cfg.List.Replace(entries)
	}

	switch {
	case err != nil:
		p.cfg.Logger.Error("revocation list not kept", slog.String(logkey.Error, err.Error()))
	case changed:
		p.cfg.Logger.Info("revocation list updated", slog.Int(logkey.Revoked, len(entries)))
	}
}

// ask reads one control plane's list.
func ask(ctx context.Context, conn grpc.ClientConnInterface) ([]Entry, error) {
	ctx, cancel := context.WithTimeout(ctx, PollTimeout)
	defer cancel()

	resp, err := revocations.NewNodeRevocationServiceClient(conn).Serials(ctx, &revocations.SerialsRequest{})
	if err != nil {
		return nil, err
	}

	return fromWire(resp.GetRevocations())
}

// fromWire reads a control plane's list, checked and bounded.
func fromWire(list []*revocations.Revocation) ([]Entry, error) {
	if len(list) > MaxEntries {
		return nil, fmt.Errorf("revocation: %d revocations, more than %d", len(list), MaxEntries)
	}

	out := make([]Entry, 0, len(list))

	for _, r := range list {
		e, err := FromProto(r)
		if err != nil {
			return nil, err
		}

		out = append(out, e)
	}

	return out, nil
}
