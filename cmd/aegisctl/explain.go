package main

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/certs"
)

// explain turns the error of a call into one a person can act on: which
// endpoint could not be reached and why, which roles a refused method
// needs, what the node said. Errors that are not gRPC statuses pass as
// they are.
func (s *session) explain(err error) error {
	st, ok := status.FromError(err)
	if !ok || err == nil {
		return err
	}

	switch st.Code() {
	case codes.Unavailable:
		if cause, dial := transportCause(st.Message()); dial {
			return fmt.Errorf("cannot reach %s %s: %s", plural(len(s.endpoints), "endpoint", "endpoints"),
				strings.Join(s.endpoints, ", "), cause)
		}
	case codes.Unauthenticated:
		return fmt.Errorf("%s refused the client certificate of context %q: %s",
			strings.Join(s.endpoints, ", "), s.name, st.Message())
	case codes.PermissionDenied:
		return fmt.Errorf("permission denied: %s (context %q)", permissionText(st.Message()), s.name)
	}

	return errors.New(describeStatus(st))
}

// describeStatus renders a status for a person: the code in words, then the
// message, with the layers of gRPC's own wording taken off.
func describeStatus(st *status.Status) string {
	msg := st.Message()

	switch st.Code() {
	case codes.Unavailable:
		if cause, dial := transportCause(msg); dial {
			return "unreachable: " + cause
		}

		// apid keeps why it could not reach another node to its log.
		if strings.HasPrefix(msg, "apid: node ") && strings.HasSuffix(msg, " unreachable") {
			return "unreachable (apid could not connect to the node)"
		}

		return "unavailable: " + msg
	case codes.PermissionDenied:
		return "permission denied: " + permissionText(msg)
	case codes.DeadlineExceeded:
		return "no answer in time: " + msg
	case codes.Unimplemented:
		return "not implemented by the node: " + msg
	default:
		return codeWords(st.Code()) + ": " + msg
	}
}

// transportCause finds the cause of a connection failure in a gRPC
// Unavailable message (`connection error: desc = "transport: Error while
// dialing: dial tcp …: connect: connection refused"`), and reports whether
// the message was about the connection at all.
func transportCause(msg string) (string, bool) {
	const connError = "connection error: desc = "

	i := strings.Index(msg, connError)
	if i < 0 {
		return "", false
	}

	cause, rest := msg[i+len(connError):], ""
	if unquoted, after, ok := strings.Cut(strings.TrimPrefix(cause, `"`), `"`); ok && strings.HasPrefix(cause, `"`) {
		cause, rest = unquoted, after
	}

	cause = strings.TrimPrefix(cause, "transport: ")
	cause = strings.TrimPrefix(cause, "Error while dialing: ")

	if strings.Contains(rest, "goaway") {
		cause += " (the endpoint closed the connection: it was stopping or restarting)"
	}

	return cause, true
}

// permissionText is authz's refusal without its package prefix: it names
// the method, the roles that would allow it and the caller's.
func permissionText(msg string) string { return strings.TrimPrefix(msg, "authz: ") }

// codeWords is a status code as words: NotFound becomes "not found".
func codeWords(c codes.Code) string {
	var b strings.Builder

	for i, r := range c.String() {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte(' ')
		}

		b.WriteRune(r)
	}

	return strings.ToLower(b.String())
}

// certificateTimeError says that the context's client certificate is
// expired or not yet valid, with the date and what fixes it.
func (s *session) certificateTimeError(err error) error {
	var te *certs.CertificateTimeError
	if !errors.As(err, &te) {
		return err
	}

	if !te.Expired {
		return fmt.Errorf("context %q: %w\nCheck this machine's clock ('date -u'); the certificate's validity starts at that date", s.name, err)
	}

	return fmt.Errorf(`context %q: %w
An expired certificate cannot renew itself. With a valid admin config, make a new one and merge it:
  aegisctl --aegisconfig ADMIN-CONFIG config new NEW-FILE --roles %s
  aegisctl --aegisconfig %s config merge NEW-FILE --force`, s.name, err, strings.Join(s.cert.Subject.Organization, ","), s.path)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}

	return many
}
