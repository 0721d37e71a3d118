package grpcopt

import "google.golang.org/grpc"

// NoReadBuffer gives a client's connections no gRPC read buffer of their
// own. crypto/tls already holds a whole record for each connection, so
// gRPC's 32 KiB reader on top of it only added to what a kept connection
// costs; trustd's server does without it for the same reason
// (trustd.ReadBufferSize). A hollow-node run of 10,000 workers held
// 220 MiB of these readers, a third of its live heap.
func NoReadBuffer() grpc.DialOption { return grpc.WithReadBufferSize(0) }
