package trustd

import (
	"net"

	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/internal/connlimit"
)

// RegisterOnServer lets an external test add a test-only service to the
// gRPC server New built, before it serves.
func RegisterOnServer(s *Server, register func(*grpc.Server)) { register(s.grpc) }

// ConnStats is the connection table of s (internal/connlimit).
func ConnStats(s *Server) connlimit.Stats { return s.conns.Stats() }

// Knows reports whether s's connection table knows ip as a node's source.
func Knows(s *Server, ip string) bool { return s.conns.Known(&net.TCPAddr{IP: net.ParseIP(ip)}) }
