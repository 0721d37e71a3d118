package rollout

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/aegis-os/aegis/internal/replies"
)

// defaultReply is Options.Reply's default: err as it is, else the first
// node that failed in resp. Every reply of the Talos API and of Aegis's
// own services is `repeated X messages`, each X with its node's
// common.Metadata, the node's error in it when the node failed.
func defaultReply(resp proto.Message, err error) error {
	if err != nil || resp == nil {
		return err
	}

	for _, m := range replies.Messages(resp) {
		if md := replies.Metadata(m); md.GetError() != "" { //nolint:staticcheck // the field apid fills
			return fmt.Errorf("%s: %s", md.GetHostname(), md.GetError()) //nolint:staticcheck // see above
		}
	}

	return nil
}
