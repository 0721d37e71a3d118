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
//
// A received frame holds a reference to gRPC's receive buffers (bufs)
// rather than a copy of them: a call routed to one target passes the
// caller's bytes on, and the backend's back, without apid copying them.
// Whoever received it calls free once it has been sent; a frame built
// here (merged or tagged replies) holds payload, which nobody frees.
type frame struct {
	payload []byte
	bufs    mem.BufferSlice
}

// bytes is the frame's message in one slice, for the fan-out's tagging,
// which reads it: the buffers themselves when gRPC received the message
// in one (the usual case), else a copy.
func (f *frame) bytes() []byte {
	switch {
	case f.bufs == nil:
		return f.payload
	case len(f.bufs) == 1:
		return f.bufs[0].ReadOnlyData()
	default:
		return f.bufs.Materialize()
	}
}

// own replaces the reference to gRPC's buffers by a copy: for a frame
// handed to several senders at once (a fan-out's request), whose last use
// nobody tracks, so that the buffers go back to gRPC at once.
func (f *frame) own() {
	if f.bufs != nil {
		f.payload = f.bufs.Materialize()
		f.free()
	}
}

// free gives the buffers back to gRPC. The frame must not be sent again.
func (f *frame) free() {
	if f.bufs != nil {
		f.bufs.Free()
		f.bufs = nil
	}
}

// rawCodec moves frames as they are on the wire. It is named "proto" so
// the content type on every hop stays application/grpc+proto. The one
// service apid serves itself (grpc.health.v1) has typed messages: those
// go to gRPC's proto codec.
type rawCodec struct{}

// protoCodec is gRPC's own, for anything that is not a frame.
var protoCodec = encoding.GetCodecV2(proto.Name)

// Marshal hands gRPC the frame's buffers with a reference of their own,
// which gRPC frees once the message is written; the frame keeps its own
// reference, so the same frame may be sent more than once.
func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(*frame)
	if !ok {
		return protoCodec.Marshal(v)
	}

	if f.bufs != nil {
		f.bufs.Ref()

		return f.bufs, nil
	}

	return mem.BufferSlice{mem.SliceBuffer(f.payload)}, nil
}

// Unmarshal takes a reference to the received buffers: gRPC frees its own
// once Unmarshal returns, and they are reused only once the frame's
// reference is freed too.
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return protoCodec.Unmarshal(data, v)
	}

	data.Ref()
	f.payload, f.bufs = nil, data

	return nil
}

func (rawCodec) Name() string { return "proto" }
