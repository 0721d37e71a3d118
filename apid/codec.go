package apid

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// frame is one gRPC message as bytes: apid routes messages without knowing
// their types, so a method it has never heard of is routed all the same.
// A frame is never changed after it is received; fan-out hands the same
// frame to every node.
type frame struct {
	payload []byte
}

// rawCodec moves frames as they are on the wire. It is named "proto" so
// the content type on every hop stays application/grpc+proto. The one
// service apid serves itself (grpc.health.v1) has typed messages: those
// go to gRPC's proto codec.
type rawCodec struct{}

// protoCodec is gRPC's own, for anything that is not a frame.
var protoCodec = encoding.GetCodecV2(proto.Name)

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(*frame)
	if !ok {
		return protoCodec.Marshal(v)
	}

	return mem.BufferSlice{mem.SliceBuffer(f.payload)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return protoCodec.Unmarshal(data, v)
	}

	// Materialize copies: gRPC reuses the buffers once Unmarshal returns.
	f.payload = data.Materialize()

	return nil
}

func (rawCodec) Name() string { return "proto" }
