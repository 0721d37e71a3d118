package rollout

import (
	"fmt"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// defaultReply is Options.Reply's default: err as it is, else the first
// node that failed in resp. Every reply of the Talos API and of Aegis's
// own services is `repeated X messages`, each X with its node's
// common.Metadata, the node's error in it when the node failed.
func defaultReply(resp proto.Message, err error) error {
	if err != nil || resp == nil {
		return err
	}

	r := resp.ProtoReflect()

	fd := r.Descriptor().Fields().ByName("messages")
	if fd == nil || !fd.IsList() || fd.Message() == nil {
		return nil
	}

	list := r.Get(fd).List()
	for i := range list.Len() {
		if md := metadataOf(list.Get(i).Message()); md.GetError() != "" { //nolint:staticcheck // the field apid fills
			return fmt.Errorf("%s: %s", md.GetHostname(), md.GetError()) //nolint:staticcheck // see above
		}
	}

	return nil
}

// metadataOf returns the common.Metadata of one reply message, or nil.
func metadataOf(m protoreflect.Message) *common.Metadata {
	fd := m.Descriptor().Fields().ByName("metadata")
	if fd == nil || fd.Message() == nil || !m.Has(fd) {
		return nil
	}

	md, _ := m.Get(fd).Message().Interface().(*common.Metadata)

	return md
}
