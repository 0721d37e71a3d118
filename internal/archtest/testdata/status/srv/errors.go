package srv

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func toStatus(err error) error { return status.Error(codes.Internal, "srv: internal error") }
