// Package rollout is the engine of Aegis's cluster-wide procedures (the
// rotations of the OS CA, of the etcd CA and of the static token): it walks
// the cluster through one endpoint, a control plane, reaching each member
// with `node` metadata. It lists the members (control planes first), reads
// a member's config in effect, applies a config without a reboot, checks
// every member, and keeps the record a resumed procedure starts from. Each
// procedure is a short list of steps in a package of its own, on top of a
// Walker.
package rollout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/protobuf/proto"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
)

// DefaultCallTimeout bounds one call to one member when Options leave it
// zero: a node that has not answered by then is taken as down, and the
// procedure stops, naming it, rather than wait on it.
const DefaultCallTimeout = 30 * time.Second

// Options are what a Walker needs of its caller.
type Options struct {
	// Client reaches every member through the endpoint. Required.
	Client *client.Client
	// Reply turns the outcome of a call into its error: err worded for a
	// person, else the nodes of resp that failed (the metadata of each of
	// its messages). nil: err as it is, else the first node failure in
	// resp's messages.
	Reply func(resp proto.Message, err error) error
	// Out receives the progress lines of a procedure. nil: discarded.
	Out io.Writer
	// Clock is the time configs are validated at, and what pauses and
	// durations are measured with. nil: the system clock.
	Clock clock.Clock
	// CallTimeout bounds one call to one member. Zero: DefaultCallTimeout.
	CallTimeout time.Duration
	// DryRun: the procedure shows what it would do and changes nothing.
	DryRun bool
}

// Walker walks one cluster for one procedure.
type Walker struct {
	opts   Options
	client *client.Client
}

// New returns a Walker with opts, its defaults applied.
func New(opts Options) *Walker {
	if opts.Reply == nil {
		opts.Reply = defaultReply
	}

	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}

	opts.Clock = defaults.Clock(opts.Clock)
	opts.Out = defaults.Output(opts.Out)

	return &Walker{opts: opts, client: opts.Client}
}

// Client is the client the walker calls with.
func (w *Walker) Client() *client.Client { return w.client }

// SetClient replaces the client, once a procedure has new credentials.
func (w *Walker) SetClient(c *client.Client) { w.client = c }

// Clock is the walker's clock.
func (w *Walker) Clock() clock.Clock { return w.opts.Clock }

// Out is where progress goes.
func (w *Walker) Out() io.Writer { return w.opts.Out }

// DryRun reports whether nothing may change.
func (w *Walker) DryRun() bool { return w.opts.DryRun }

// CallTimeout is the bound of one call to one member.
func (w *Walker) CallTimeout() time.Duration { return w.opts.CallTimeout }

// Check is the error of a call: see Options.Reply.
func (w *Walker) Check(resp proto.Message, err error) error { return w.opts.Reply(resp, err) }

// ErrDryRun refuses to run the steps of a procedure whose options say
// it is a dry run: only its plan may be read.
var ErrDryRun = errors.New("a dry run changes nothing: read its plan instead of running it")

// Printf writes a progress line.
func (w *Walker) Printf(format string, args ...any) {
	fmt.Fprintf(w.opts.Out, format, args...)
}

// Timed runs one phase and prints its name, then how long it took.
func (w *Walker) Timed(ctx context.Context, name string, fn func(context.Context) error) error {
	w.Printf("%s...\n", name)

	start := w.opts.Clock.Now()
	if err := fn(ctx); err != nil {
		return err
	}

	w.Printf("%s: done in %s\n", name, w.opts.Clock.Now().Sub(start).Round(time.Millisecond))

	return nil
}

// Route bounds ctx by the call timeout and routes it to m.
func (w *Walker) Route(ctx context.Context, m Member) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, w.opts.CallTimeout)

	return client.WithNode(ctx, m.Addr), cancel
}
