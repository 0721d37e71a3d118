package connect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/certs"
	"github.com/aegis-os/aegis/internal/replies"
)

// ConfigIssuer is the one call IssueClientConfig makes; the machinery
// client's MachineClient is one.
type ConfigIssuer interface {
	GenerateClientConfiguration(ctx context.Context, in *machine.GenerateClientConfigurationRequest, opts ...grpc.CallOption) (*machine.GenerateClientConfigurationResponse, error)
}

// IssueClientConfig asks the node ctx reaches (one node: no fan-out) for
// a client config whose certificate carries roles and lives ttl. The
// call's error is returned as it is, for the caller to word; a node's
// failure in the reply, or a reply of other than one config, is an error
// of its own.
func IssueClientConfig(ctx context.Context, mc ConfigIssuer, roles []string, ttl time.Duration) (*certs.ClientConfig, error) {
	resp, err := mc.GenerateClientConfiguration(ctx, &machine.GenerateClientConfigurationRequest{
		Roles: roles, CrtTtl: durationpb.New(ttl),
	})
	if err != nil {
		return nil, err
	}

	if len(resp.GetMessages()) != 1 {
		return nil, fmt.Errorf("%d client configs in the reply, want 1", len(resp.GetMessages()))
	}

	msg := resp.GetMessages()[0]
	if text, failed := replies.Failure(msg.GetMetadata()); failed {
		return nil, errors.New(text)
	}

	return certs.ParseClientConfig("the issued client config", msg.GetTalosconfig())
}
