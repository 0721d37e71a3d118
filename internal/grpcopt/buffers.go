package grpcopt

import "google.golang.org/grpc"

// NoReadBuffer gives a client's connections no gRPC read buffer of their
// own. crypto/tls already holds a whole record for each connection, so
// gRPC's 32 KiB reader on top of it only added to what a kept connection
// costs; trustd's server does without it for the same reason
// (trustd.ReadBufferSize). A hollow-node run of 10,000 workers held
// 220 MiB of these readers, a third of its live heap.
func NoReadBuffer() grpc.DialOption { return grpc.WithReadBufferSize(0) }

// WriteBufferSize is the gRPC write buffer of a connection to trustd, on
// either side. gRPC takes it from a shared pool while the connection
// writes, and its writer yields once after a small write before it
// flushes, holding the buffer: when thousands of connections write at
// once (a revocation pushed to every worker, the workers of a lost control
// plane connecting to the others), each holds one. At gRPC's 32 KiB a
// push to 3,300 workers allocated 104 MiB in trustd; at 4 KiB, 15 MiB.
// What goes over these connections is small (a heartbeat, a list of
// revocations, a certificate and its request), so 4 KiB holds a whole
// message, and a larger one is written 4 KiB at a time.
const WriteBufferSize = 4 << 10

// SmallWriteBuffer gives a client's connections a write buffer of
// WriteBufferSize.
func SmallWriteBuffer() grpc.DialOption { return grpc.WithWriteBufferSize(WriteBufferSize) }
