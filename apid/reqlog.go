package apid

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"time"

	middleware "github.com/grpc-ecosystem/go-grpc-middleware/v2"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/internal/logkey"
)

// Fields of the request log line that no other log line has.
const (
	fieldStartTime = "grpc.start_time"
	fieldDeadline  = "grpc.request.deadline"
	fieldGRPCError = "grpc.error"
	msgFinished    = "finished call"
)

// requestLog writes one line per call once it has finished, at a level
// its code decides (go-grpc-middleware's DefaultServerCodeToLevel), with
// the fields go-grpc-middleware's logging interceptor writes: service,
// method, peer, start time and deadline, the fields later steps add
// (logging.AddFields: roles, caller), code, error and duration. It is
// that interceptor without what apid does not use (start, payload
// events, per-message hooks), whose fields it built at every call
// whether the line was written or not.
type requestLog struct {
	log *slog.Logger
}

func (r requestLog) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	ctx = logging.InjectFields(ctx, nil) // where later steps add theirs
	resp, err := handler(ctx, req)
	r.finished(ctx, info.FullMethod, start, err)

	return resp, err
}

func (r requestLog) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	start := time.Now()
	wrapped := middleware.WrapServerStream(ss)
	wrapped.WrappedContext = logging.InjectFields(ss.Context(), nil)
	err := handler(srv, wrapped)
	r.finished(wrapped.WrappedContext, info.FullMethod, start, err)

	return err
}

func (r requestLog) finished(ctx context.Context, fullMethod string, start time.Time, err error) {
	if errors.Is(err, io.EOF) {
		err = nil
	}

	code := status.Code(err)
	level := slog.Level(logging.DefaultServerCodeToLevel(code))

	if !r.log.Enabled(ctx, level) {
		return
	}

	service, method := splitMethod(fullMethod)
	fields := make([]any, 0, 24)
	fields = append(fields, logkey.Service, service, logkey.Method, method)

	if addr := peerAddress(ctx); addr != "" {
		fields = append(fields, logkey.Peer, addr)
	}

	fields = append(fields, fieldStartTime, start.Format(time.RFC3339))
	if d, ok := ctx.Deadline(); ok {
		fields = append(fields, fieldDeadline, d.Format(time.RFC3339))
	}

	fields = appendNew(fields, logging.ExtractFields(ctx))
	fields = append(fields, logkey.Code, code.String())

	if err != nil {
		fields = append(fields, fieldGRPCError, err.Error())
	}

	fields = append(fields, logging.DurationToTimeMillisFields(time.Since(start))...)
	r.log.Log(ctx, level, msgFinished, fields...)
}

// appendNew appends the fields of add whose keys fields does not hold:
// as in go-grpc-middleware, the call's own fields come first.
func appendNew(fields []any, add logging.Fields) []any {
next:
	for i := 0; i+1 < len(add); i += 2 {
		for j := 0; j+1 < len(fields); j += 2 {
			if fields[j] == add[i] {
				continue next
			}
		}

		fields = append(fields, add[i], add[i+1])
	}

	return fields
}

// splitMethod splits "/package.Service/Method".
func splitMethod(fullMethod string) (service, method string) {
	service, method, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if !ok {
		return "unknown", "unknown"
	}

	return service, method
}

// peerAddress is the client's address, written once per connection.
func peerAddress(ctx context.Context) string {
	if st, ok := ctx.Value(connStateKey{}).(*connState); ok && st.peerAddr != "" {
		return st.peerAddr
	}

	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}

	return ""
}
