package trustdclient

import (
	"context"
	"io"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"

	"github.com/aegis-os/aegis/internal/backoff"
	"github.com/aegis-os/aegis/internal/clock"
)

// pacer spaces the connection attempts to one endpoint after failed ones:
// a connection refused, or closed before its TLS handshake ended (a
// control plane down, or one whose listener makes newcomers wait and
// closed this one). The first attempt after a success goes at once; after
// each failure the next waits until a delay drawn uniformly below a step that
// doubles from ReconnectBackoffMin to ReconnectBackoffMax ("full jitter")
// has passed since the failure, so that the nodes of a control plane, which lose their connections at
// the same moment, come back spread over the step rather than together.
// gRPC's own reconnect backoff is set to a short floor (ReconnectFloor),
// so that the pacer's is the one that counts.
type pacer struct {
	clk clock.Clock

	mu sync.Mutex
	b  backoff.Backoff
	// until is when the next attempt may go: a failure's time and the
	// delay drawn then; zero after a success.
	until time.Time
}

func newPacer(clk clock.Clock, rand io.Reader) *pacer {
	return &pacer{clk: clk, b: backoff.Backoff{Min: ReconnectBackoffMin, Max: ReconnectBackoffMax, Rand: rand, Full: true}}
}

// failed records a failed attempt: the next waits longer.
func (p *pacer) failed() {
	p.mu.Lock()
	defer p.mu.Unlock()

	p.until = p.clk.Now().Add(p.b.Next())
}

// succeeded records a connection made: the next attempt goes at once.
func (p *pacer) succeeded() {
	p.mu.Lock()
	defer p.mu.Unlock()

	p.b.Reset()
	p.until = time.Time{}
}

// wait waits before an attempt until the time the last failure drew.
func (p *pacer) wait(ctx context.Context) error {
	p.mu.Lock()
	d := p.until.Sub(p.clk.Now())
	p.mu.Unlock()

	if d > 0 && !clock.Sleep(ctx, p.clk, d) {
		return ctx.Err()
	}

	return nil
}

// dialOptions are the options that make a connection's attempts go
// through p: its dialer waits p's delay, then dials from source (empty:
// the system chooses), and a failed dial counts; the handshake's outcome
// is counted by perHandshake.
func (p *pacer) dialOptions(source string) []grpc.DialOption {
	d := &net.Dialer{}
	if source != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(source)}
	}

	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		if err := p.wait(ctx); err != nil {
			return nil, err
		}

		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			p.failed()
		}

		return conn, err
	}

	return []grpc.DialOption{
		grpc.WithContextDialer(dial),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           grpcbackoff.Config{BaseDelay: ReconnectFloor, Multiplier: 1, MaxDelay: ReconnectFloor},
			MinConnectTimeout: ConnectTimeout,
		}),
	}
}
