package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ReaderConfig asks admin's node for the client config of a new os:reader
// identity whose certificate lives ttl.
func ReaderConfig(ctx context.Context, admin *client.Client, ttl time.Duration) (*clientconfig.Config, error) {
	resp, err := admin.GenerateClientConfiguration(ctx, &machine.GenerateClientConfigurationRequest{
		Roles: []string{"os:reader"}, CrtTtl: durationpb.New(ttl),
	})
	if err != nil {
		return nil, fmt.Errorf("bench: a reader client config: %w", err)
	}

	if len(resp.GetMessages()) != 1 {
		return nil, fmt.Errorf("bench: %d replies to GenerateClientConfiguration, want 1", len(resp.GetMessages()))
	}

	return clientconfig.FromBytes(resp.GetMessages()[0].GetTalosconfig())
}

// Connect opens n connections (Talos clients) with cfg's identity.
func Connect(ctx context.Context, cfg *clientconfig.Config, n int) ([]*client.Client, error) {
	out := make([]*client.Client, 0, n)

	for range n {
		c, err := client.New(ctx, client.WithConfig(cfg))
		if err != nil {
			return out, err
		}

		out = append(out, c)
	}

	return out, nil
}

// Refusals counts follows refused ResourceExhausted, by the cap their
// message names.
type Refusals map[string]int

// Total is how many follows were refused.
func (r Refusals) Total() int {
	n := 0
	for _, v := range r {
		n += v
	}

	return n
}

// OpenFollows tries n Events follows through c, one after the other, each
// until its first event (machined sends an empty one as soon as it
// follows). The opened follows stay open until ctx ends. A follow refused
// ResourceExhausted is counted in the refusals; any other failure ends
// the attempt.
func OpenFollows(ctx context.Context, c *client.Client, n int, refused Refusals) (opened int, err error) {
	for range n {
		stream, err := c.MachineClient.Events(ctx, &machine.EventsRequest{})
		if err == nil {
			_, err = stream.Recv()
		}

		switch {
		case err == nil:
			opened++
		case status.Code(err) == codes.ResourceExhausted:
			refused[capOf(status.Convert(err).Message())]++
		default:
			return opened, fmt.Errorf("bench: follow %d: %w", opened+refused.Total(), err)
		}
	}

	return opened, nil
}

// capOf is the part of a refusal that names the cap: what follows "too
// many open streams" or "too many open calls", or the whole message.
func capOf(msg string) string {
	for _, marker := range []string{"too many open streams ", "too many open calls "} {
		if _, after, ok := strings.Cut(msg, marker); ok {
			return after
		}
	}

	return msg
}

// CloseAll closes clients, joining their errors.
func CloseAll(clients []*client.Client) error {
	var errs []error
	for _, c := range clients {
		errs = append(errs, c.Close())
	}

	return errors.Join(errs...)
}
