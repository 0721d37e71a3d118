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

// code chooses a code for a status made elsewhere: the violation.
func code(found bool) codes.Code {
	if found {
		return codes.OK
	}

	return codes.NotFound
}

// compares only reads a code.
func compares(err error) bool { return grpcstatus.Code(err) == codes.NotFound }
