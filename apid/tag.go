package apid

import (
	"errors"
	"fmt"
	"slices"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Replies of a fan-out are merged and tagged on the wire, without decoding
// them, by the convention every Talos reply follows:
//
//	message XResponse { repeated X messages = 1; }
//	message X { common.Metadata metadata = 1; ... }
//
// and every streamed message is an X itself. Concatenated XResponse
// encodings are one XResponse holding all their messages; appending an
// encoded field 1 to an X sets (or, by protobuf's merge rule for repeated
// embedded fields, overrides) its metadata. A node's failure becomes an X
// that has only metadata, with the error: any X decodes from it.

// metadataField is the field number of `messages` in a response and of
// `metadata` in each message.
const metadataField protowire.Number = 1

// errNotTalosReply is returned for a unary reply that does not follow the
// convention, so it cannot be merged.
var errNotTalosReply = errors.New("apid: reply does not follow the messages convention")

// tag marks the replies of one node.
type tag struct {
	hostname string
	// meta is the encoded `metadata` field carrying the hostname.
	meta []byte
}

func newTag(hostname string) tag {
	return tag{hostname: hostname, meta: metadataBytes(&common.Metadata{Hostname: hostname})}
}

// reply tags one message from the node: a streamed message directly, a
// unary response in each of its messages. A unary response with no message
// gets one holding only the metadata, so the node still shows in the reply.
// The result never shares memory with payload, which may be gRPC's buffer.
func (t tag) reply(payload []byte, streaming bool) ([]byte, error) {
	if streaming {
		return slices.Concat(payload, t.meta), nil
	}

	return tagResponse(payload, t.meta)
}

// failure is the node's error as a message, streamed or unary.
func (t tag) failure(st *status.Status, streaming bool) []byte {
	//nolint:staticcheck // Error is the field Talos clients read.
	m := metadataBytes(&common.Metadata{Hostname: t.hostname, Error: st.Err().Error(), Status: st.Proto()})
	if streaming {
		return m
	}

	return appendEntry(nil, m)
}

// tagResponse appends meta to every `messages` entry of resp and copies
// every other field unchanged.
func tagResponse(resp, meta []byte) ([]byte, error) {
	out := make([]byte, 0, len(resp)+2*len(meta)+8)
	found := false

	for len(resp) > 0 {
		num, typ, n := protowire.ConsumeTag(resp)
		if n < 0 {
			return nil, fmt.Errorf("%w: %w", errNotTalosReply, protowire.ParseError(n))
		}

		if num == metadataField {
			if typ != protowire.BytesType {
				return nil, fmt.Errorf("%w: field 1 has wire type %d", errNotTalosReply, typ)
			}

			v, m := protowire.ConsumeBytes(resp[n:])
			if m < 0 {
				return nil, fmt.Errorf("%w: %w", errNotTalosReply, protowire.ParseError(m))
			}

			out = protowire.AppendTag(out, metadataField, protowire.BytesType)
			out = protowire.AppendVarint(out, uint64(len(v)+len(meta)))
			out = append(append(out, v...), meta...)
			resp, found = resp[n+m:], true

			continue
		}

		m := protowire.ConsumeFieldValue(num, typ, resp[n:])
		if m < 0 {
			return nil, fmt.Errorf("%w: %w", errNotTalosReply, protowire.ParseError(m))
		}

		out, resp = append(out, resp[:n+m]...), resp[n+m:]
	}

	if !found {
		out = appendEntry(out, meta)
	}

	return out, nil
}

// appendEntry appends a `messages` entry whose content is msg.
func appendEntry(out, msg []byte) []byte {
	out = protowire.AppendTag(out, metadataField, protowire.BytesType)

	return protowire.AppendBytes(out, msg)
}

// metadataBytes encodes m as field 1 of an enclosing message.
func metadataBytes(m *common.Metadata) []byte {
	body, err := proto.Marshal(m)
	if err != nil {
		// common.Metadata has only strings and a status: marshaling it
		// cannot fail unless the protobuf runtime is broken.
		panic(fmt.Sprintf("apid: encoding metadata: %v", err))
	}

	return appendEntry(nil, body)
}
