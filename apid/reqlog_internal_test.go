package apid

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"regexp"
	"testing"
	"time"

	middleware "github.com/grpc-ecosystem/go-grpc-middleware/v2"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/logtest"
)

// middlewareLog is the request log apid wrote with go-grpc-middleware's
// logging interceptor, which requestLog replaces line for line.
func middlewareLog(l *slog.Logger) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	logger := logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		l.Log(ctx, slog.Level(lvl), msg, fields...)
	})
	opts := []logging.Option{
		logging.WithLogOnEvents(logging.FinishCall),
		logging.WithDisableLoggingFields(logging.SystemTag[0], logging.ComponentFieldKey, logging.MethodTypeFieldKey),
	}

	return logging.UnaryServerInterceptor(logger, opts...), logging.StreamServerInterceptor(logger, opts...)
}

// varying are the values that differ from one call to the next.
var varying = regexp.MustCompile(`"(time|grpc.start_time|grpc.time_ms)":"[^"]*"`)

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context //nolint:containedctx // the stream's context
}

func (s ctxStream) Context() context.Context { return s.ctx }

// TestRequestLogLine: apid's request log line is the one
// go-grpc-middleware's interceptor wrote, field for field and in the same
// order, at the same level: for calls that pass, fail or are refused,
// unary or streamed, with the fields later steps add.
func TestRequestLogLine(t *testing.T) {
	for name, callErr := range map[string]error{
		"ok":      nil,
		"eof":     io.EOF,
		"refused": status.Error(codes.PermissionDenied, "authz: denied"),
		"failed":  errors.New("apid: something broke"),
	} {
		t.Run(name, func(t *testing.T) {
			var want, got logtest.Sink

			oldUnary, oldStream := middlewareLog(want.Logger())
			r := requestLog{log: got.Logger()}

			ctx, cancel := context.WithDeadline(peer.NewContext(context.Background(), &peer.Peer{
				Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000},
			}), time.Now().Add(time.Hour))
			defer cancel()

			unaryHandler := func(ctx context.Context, _ any) (any, error) {
				logging.AddFields(ctx, logging.Fields{logkey.CallerSerial, "2a", logkey.CallerSubject, "CN=c"})
				logging.AddFields(ctx, logging.Fields{logkey.Roles, "os:admin"})

				return nil, callErr
			}
			streamHandler := func(_ any, ss grpc.ServerStream) error {
				_, err := unaryHandler(ss.Context(), nil)

				return err
			}

			uinfo := &grpc.UnaryServerInfo{FullMethod: "/machine.MachineService/Version"}
			sinfo := &grpc.StreamServerInfo{FullMethod: "/machine.MachineService/Events", IsServerStream: true}

			for _, run := range []func(grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor){
				func(u grpc.UnaryServerInterceptor, _ grpc.StreamServerInterceptor) {
					_, _ = u(ctx, nil, uinfo, unaryHandler)
				},
				func(_ grpc.UnaryServerInterceptor, s grpc.StreamServerInterceptor) {
					_ = s(nil, middleware.WrapServerStream(ctxStream{ctx: ctx}), sinfo, streamHandler)
				},
			} {
				run(oldUnary, oldStream)
				run(r.unary, r.stream)
			}

			w, g := varying.ReplaceAllString(want.String(), "-"), varying.ReplaceAllString(got.String(), "-")
			if w != g || len(want.Records(t)) != 2 {
				t.Fatalf("request log\n%s\nwant\n%s", g, w)
			}
		})
	}
}

// TestMillis: the duration field is go-grpc-middleware's, digit for digit,
// from a microsecond to days, where float32 rounds and %v turns to
// exponents.
func TestMillis(t *testing.T) {
	for d := time.Microsecond; d < 100*time.Hour; d = d*3 + 7*time.Microsecond {
		want := logging.DurationToTimeMillisFields(d)[1]
		if got := millis(d); got != want {
			t.Fatalf("%v: %q, want %q", d, got, want)
		}
	}

	for _, d := range []time.Duration{0, 999, time.Microsecond, 1500 * time.Microsecond, time.Second, 24 * time.Hour * 365} {
		if got, want := millis(d), logging.DurationToTimeMillisFields(d)[1]; got != want {
			t.Fatalf("%v: %q, want %q", d, got, want)
		}
	}
}
