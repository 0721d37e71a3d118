package trustd

import "google.golang.org/grpc"

// RegisterOnServer lets an external test add a test-only service to the
// gRPC server New built, before it serves.
func RegisterOnServer(s *Server, register func(*grpc.Server)) { register(s.grpc) }
