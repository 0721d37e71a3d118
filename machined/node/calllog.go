package node

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/internal/logkey"
)

// MsgCall is the message of the line machined writes for each call it has
// served on machined.sock.
const MsgCall = "finished call"

// callLog writes one line to machined's log for each call machined.sock
// has served, once it ends: the service and method, the caller (the client
// apid names in the call's metadata, apid being the only peer of the
// socket), the code and the duration, at the level of go-grpc-middleware's
// DefaultServerCodeToLevel, as apid's request log. A follow of machined's
// log thus sees another client's calls to the node, as Talos's does. Never
// the request, the reply or the error text: nothing a caller sent or got,
// secrets included, goes to the log; one line a call bounds its volume by
// the calls machined admits. The health service (apid's probes) is not
// recorded.
type callLog struct {
	log *slog.Logger
}

func (c callLog) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	c.finished(ctx, info.FullMethod, start, err)

	return resp, err
}

func (c callLog) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	start := time.Now()
	err := handler(srv, ss)
	c.finished(ss.Context(), info.FullMethod, start, err)

	return err
}

func (c callLog) finished(ctx context.Context, fullMethod string, start time.Time, err error) {
	code := status.Code(err)

	level := slog.Level(logging.DefaultServerCodeToLevel(code))
	if !c.log.Enabled(ctx, level) {
		return
	}

	service, method, _ := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")

	fields := make([]any, 0, 12)
	fields = append(fields, logkey.Service, service, logkey.Method, method)

	md, _ := metadata.FromIncomingContext(ctx)
	if caller, ok, _ := authz.CallerFromMetadata(md); ok {
		fields = append(fields, logkey.CallerSerial, caller.Serial, logkey.CallerSubject, caller.Subject)
	}

	fields = append(fields, logkey.Code, code.String())
	fields = append(fields, logging.DurationToTimeMillisFields(time.Since(start))...)

	c.log.Log(ctx, level, MsgCall, fields...)
}
