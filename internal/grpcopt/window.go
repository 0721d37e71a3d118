package grpcopt

import "google.golang.org/grpc"

// ClientWindow is the HTTP/2 flow-control window, of each call and of the
// connection, that FixedWindows gives a client: gRPC's default, which the
// small messages Aegis's clients exchange never fill.
const ClientWindow = 64 << 10

// FixedWindows gives a client's connections fixed flow-control windows.
// That turns off gRPC's bandwidth estimator, which pinged the server on
// the first response data of a connection and again after each answered
// ping: a PING and its ACK, a record and a system call each way, on every
// join (a new connection each) and on every call of a kept connection
// whose calls come one after the other (a node's revocation poll, every
// second). The servers' windows are fixed for the same reason.
func FixedWindows() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithStaticStreamWindowSize(ClientWindow),
		grpc.WithStaticConnWindowSize(ClientWindow),
	}
}
