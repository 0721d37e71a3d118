package apid

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	middleware "github.com/grpc-ecosystem/go-grpc-middleware/v2"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/internal/logkey"
)

// msgFinished is the message of the request log line.
const msgFinished = "finished call"

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

	h := r.log.Handler()
	if !h.Enabled(ctx, level) {
		return
	}

	// Through the handler, as slog.Logger would, less its walk of the
	// stack for a source the handler does not write, and with the fields
	// made attributes here rather than from key-value pairs.
	rec := slog.NewRecord(time.Now(), level, msgFinished, 0)
	rec.AddAttrs(r.fields(ctx, fullMethod, start, code, err)...)

	_ = h.Handle(ctx, rec) //nolint:errcheck // as slog.Logger does: a log line that fails to write has no one to tell
}

// fields are the fields of the line, in go-grpc-middleware's order.
func (r requestLog) fields(ctx context.Context, fullMethod string, start time.Time, code codes.Code, err error) []slog.Attr {
	service, method := splitMethod(fullMethod)
	fields := make([]slog.Attr, 0, 12)
	fields = append(fields, slog.String(logkey.Service, service), slog.String(logkey.Method, method))

	if addr := peerAddress(ctx); addr != "" {
		fields = append(fields, slog.String(logkey.Peer, addr))
	}

	fields = append(fields, slog.String(logkey.StartTime, start.Format(time.RFC3339)))
	if d, ok := ctx.Deadline(); ok {
		fields = append(fields, slog.String(logkey.Deadline, d.Format(time.RFC3339)))
	}

	fields = appendNew(fields, logging.ExtractFields(ctx))
	fields = append(fields, slog.String(logkey.Code, code.String()))

	if err != nil {
		fields = append(fields, slog.String(logkey.GRPCError, err.Error()))
	}

	return append(fields, slog.String(logkey.Duration, millis(time.Since(start))))
}

// millis is a duration in milliseconds as go-grpc-middleware writes it:
// whole microseconds, as a float32, formatted as %v formats one.
func millis(d time.Duration) string {
	return strconv.FormatFloat(float64(float32(d.Microseconds())/1000), 'g', -1, 32)
}

// appendNew appends the fields of add whose keys fields does not hold:
// as in go-grpc-middleware, the call's own fields come first.
func appendNew(fields []slog.Attr, add logging.Fields) []slog.Attr {
next:
	for i := 0; i+1 < len(add); i += 2 {
		key, ok := add[i].(string)
		if !ok {
			// slog.Logger would write it as !BADKEY; nothing in apid adds one.
			continue
		}

		for _, f := range fields {
			if f.Key == key {
				continue next
			}
		}

		fields = append(fields, slog.Any(key, add[i+1]))
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
