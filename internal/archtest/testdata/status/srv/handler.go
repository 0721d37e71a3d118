package srv

import (
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
)

func allowed() error { return grpcstatus.Error(codes.Unimplemented, "named in the list") }

// Handle chooses a code of its own: the violation.
func Handle() error {
	return grpcstatus.Errorf(codes.NotFound, "no such %s", "thing")
}
