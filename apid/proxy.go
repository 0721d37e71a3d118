package apid

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/internal/logkey"
)

// errNoForwarding refuses a call for another node on a node that has no
// impersonator certificate.
var errNoForwarding = errors.New("apid: no request forwarding")

// handle serves every method: apid registers no service, so each call
// arrives here as a stream of raw frames, already authenticated and
// authorized by the interceptors, and is routed by its metadata.
func (s *Server) handle(_ any, ss grpc.ServerStream) error {
	ctx := ss.Context()

	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return s.toStatus(method, errors.New("apid: call without a method name"))
	}

	roles, ok := authz.RolesFromContext(ctx)
	if !ok {
		// The chain did not run: refuse rather than pass on a call nobody checked.
		s.log.Error("call refused: no roles in context", slog.String(logkey.Method, method))

		return status.Error(codes.PermissionDenied, "apid: call not authorized")
	}

	// One copy of the call's metadata serves the route, then becomes the
	// metadata passed on.
	in, _ := metadata.FromIncomingContext(ctx)

	rt, err := s.routeOf(ctx, in, method)
	if err != nil {
		return s.toStatus(method, err)
	}

	weight := 1
	if rt.kind == routeNodes {
		weight = len(rt.targets)
	}

	guarded, release, err := s.streams.admit(ctx, method, weight)
	if err != nil {
		return s.toStatus(method, err)
	}
	defer release()

	ss = &guardedStream{ServerStream: ss, ctx: guarded}
	md := outgoingMetadata(ctx, in, method, roles)
	c := callerOf(ctx, roles)

	ss, secrets, err := readSecrets(ss, method)
	if err != nil {
		return s.toStatus(method, ended(guarded, err))
	}

	if rs, ok := ss.(*replayStream); ok {
		defer rs.release()
	}

	return s.toStatus(method, ended(guarded, s.route(ss, method, md, rt, c, secrets)))
}

// route passes the call on where rt says. A call carrying secrets goes
// only to nodes whose proven role matches them; each other node is
// refused before anything is sent to it.
func (s *Server) route(ss grpc.ServerStream, method string, md metadata.MD, rt route, c caller, secrets *secretsCall) error {
	switch rt.kind {
	case routeNodes:
		return s.fanOut(ss, method, md, rt.targets, c, secrets)
	case routeNode:
		if err := s.checkSecrets(method, secrets, rt.targets[0]); err != nil {
			return err
		}

		return s.forwardOne(ss, method, md, rt.targets[0], c)
	default:
		if err := s.checkSecrets(method, secrets, target{local: true, role: s.names.selfRole}); err != nil {
			return err
		}

		return s.pipe(ss, s.local, "", method, md)
	}
}

// routeOf decides where a call goes. A call forwarded by another node (its
// roles came from an impersonator) is served here whatever it carries, so
// a hop never fans out again even if the node that sent it misbehaves.
func (s *Server) routeOf(ctx context.Context, md metadata.MD, method string) (route, error) {
	if authz.Impersonated(ctx) {
		return route{kind: routeLocal}, nil
	}

	rt, err := s.names.parseRoute(md)
	if err != nil {
		if s.forward == nil && errors.As(err, new(*notMemberError)) {
			// A worker knows no members: any other node is one it
			// would not forward to anyway.
			return route{}, errNoForwarding
		}

		return route{}, err
	}

	if rt.kind == routeNodes && !fansOut(method) {
		return route{}, errNoFanOut
	}

	if s.forward == nil {
		// A worker refuses the whole call rather than run part of it.
		for _, t := range rt.targets {
			if !t.local {
				return route{}, errNoForwarding
			}
		}
	}

	return rt, nil
}

func (s *Server) forwardOne(ss grpc.ServerStream, method string, md metadata.MD, t target, c caller) error {
	conn, release, err := s.backend(t, c)
	if err != nil {
		return err
	}
	defer release()

	return s.pipe(ss, conn, t.name, method, md)
}

// pipe passes a call through to one backend, node ("" for the local
// machined), unchanged, in both directions, headers and trailers included.
func (s *Server) pipe(ss grpc.ServerStream, conn *grpc.ClientConn, node, method string, md metadata.MD) error {
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()

	cs, err := s.newStream(ctx, conn, node, method, md)
	if err != nil {
		return err
	}

	if takesOneRequest(method) {
		// Most calls: the one request is passed on here and the backend
		// half-closed, then the replies, with no goroutine to start and
		// wait for. A caller that ends its side without a request has the
		// backend refuse the call.
		done, err := forwardRequest(ss, cs)
		if err != nil {
			return err
		}

		if !done {
			if err := cs.CloseSend(); err != nil {
				return err
			}
		}

		return forwardReplies(cs, ss)
	}

	reqErr := make(chan error, 1)

	go func() {
		err := forwardRequests(ss, cs)
		if err != nil {
			cancel()
		}

		reqErr <- err
	}()

	err = forwardReplies(cs, ss)
	if err != nil {
		// A failure reading the caller's side explains the backend's
		// cancellation better than the cancellation itself.
		select {
		case rerr := <-reqErr:
			if rerr != nil {
				return rerr
			}
		default:
		}
	}

	return err
}

// forwardRequests copies the caller's messages to the backend and
// half-closes the backend when the caller does.
func forwardRequests(ss grpc.ServerStream, cs grpc.ClientStream) error {
	for {
		if done, err := forwardRequest(ss, cs); done {
			return err
		}
	}
}

// forwardRequest passes on one message of the caller's. done reports that
// the caller's side has ended (the backend is then half-closed), has failed
// (err), or that the backend has ended the call, whose status arrives on
// the reply side.
func forwardRequest(ss grpc.ServerStream, cs grpc.ClientStream) (done bool, err error) {
	f := &frame{}
	if err := ss.RecvMsg(f); err != nil {
		if errors.Is(err, io.EOF) {
			return true, cs.CloseSend()
		}

		return true, err
	}
	defer f.free()

	if err := cs.SendMsg(f); err != nil {
		return true, nil
	}

	return false, nil
}

// forwardReplies copies the backend's replies, headers and trailers to the
// caller and returns the backend's status.
func forwardReplies(cs grpc.ClientStream, ss grpc.ServerStream) error {
	for first := true; ; first = false {
		f := &frame{}
		if err := cs.RecvMsg(f); err != nil {
			ss.SetTrailer(cs.Trailer())

			if errors.Is(err, io.EOF) {
				return nil
			}

			return err
		}

		if err := forwardReply(cs, ss, f, first); err != nil {
			return err
		}
	}
}

// forwardReply passes on one reply of the backend's, with its headers
// when it is the first, and frees it. The headers go out with the reply
// (SetHeader), not ahead of it: one write to the caller, not two.
func forwardReply(cs grpc.ClientStream, ss grpc.ServerStream, f *frame, first bool) error {
	defer f.free()

	if first {
		if h, err := cs.Header(); err == nil && len(h) > 0 {
			if err := ss.SetHeader(h); err != nil {
				return err
			}
		}
	}

	return ss.SendMsg(f)
}

// newStream opens the call on a backend: node ("" for the local
// machined). Every method is opened as a bidirectional stream: apid moves
// frames and does not care which kind of call it is. An error here comes
// from apid's own side of the hop (no backend has answered yet): for
// machined's socket it names a local path, for another node the dial or
// handshake that failed, so it is logged and replaced.
func (s *Server) newStream(ctx context.Context, conn *grpc.ClientConn, node, method string, md metadata.MD) (grpc.ClientStream, error) {
	desc := &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}

	cs, err := conn.NewStream(metadata.NewOutgoingContext(ctx, md), desc, method, s.callOpts...)

	switch {
	case err == nil:
		return cs, nil
	case conn != s.local:
		return nil, s.unreachable(ctx, method, node, err)
	case status.Code(err) == codes.Unavailable:
		s.log.Warn("machined unavailable", slog.String(logkey.Method, method), slog.String(logkey.Error, err.Error()))

		return nil, status.Error(codes.Unavailable, "apid: machined is unavailable")
	default:
		return nil, err
	}
}
