// Package replies words what the nodes answer for a person: a node's
// failure recorded in the metadata of its reply, a gRPC status, the cause
// of a connection that could not be made. Every reply of the Talos API
// and of Aegis's own services is
//
//	message XResponse { repeated X messages = 1; }
//	message X { common.Metadata metadata = 1; ... }
//
// and in a fan-out each X names its node in its metadata, with the node's
// error when it failed. The functions are pure; the package imports no
// server package: aegisctl and the client library (client/health) share it.
package replies

import (
	"strconv"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Messages returns the entries of a reply's `messages` field, none when it
// has no such field.
func Messages(resp proto.Message) []protoreflect.Message {
	r := resp.ProtoReflect()

	fd := r.Descriptor().Fields().ByName("messages")
	if fd == nil || !fd.IsList() || fd.Message() == nil {
		return nil
	}

	list := r.Get(fd).List()
	out := make([]protoreflect.Message, list.Len())

	for i := range list.Len() {
		out[i] = list.Get(i).Message()
	}

	return out
}

// Metadata returns the common.Metadata of one reply message, or nil.
func Metadata(m protoreflect.Message) *common.Metadata {
	fd := m.Descriptor().Fields().ByName("metadata")
	if fd == nil || fd.Message() == nil || !m.Has(fd) {
		return nil
	}

	md, _ := m.Get(fd).Message().Interface().(*common.Metadata)

	return md
}

// Failure returns the failure md records, worded for a person, and
// whether there is one.
func Failure(md *common.Metadata) (string, bool) {
	//nolint:staticcheck // Error is the field apid fills, as Talos clients read it.
	if md.GetError() == "" {
		return "", false
	}

	text := md.GetError() //nolint:staticcheck // see above
	if md.GetStatus() != nil {
		text = DescribeStatus(status.FromProto(md.GetStatus()))
	}

	return text, true
}

// DescribeStatus renders a status for a person: the code in words, then the
// message, with the layers of gRPC's own wording taken off.
func DescribeStatus(st *status.Status) string {
	msg := st.Message()

	switch st.Code() {
	case codes.Unavailable:
		if cause, dial := TransportCause(msg); dial {
			return "unreachable: " + cause
		}

		// apid keeps why it could not reach another node to its log.
		if strings.HasPrefix(msg, "apid: node ") && strings.HasSuffix(msg, " unreachable") {
			return "unreachable (apid could not connect to the node)"
		}

		return "unavailable: " + msg
	case codes.PermissionDenied:
		return "permission denied: " + PermissionText(msg)
	case codes.DeadlineExceeded:
		return "no answer in time: " + msg
	case codes.Unimplemented:
		return "not implemented by the node: " + msg
	default:
		return CodeWords(st.Code()) + ": " + msg
	}
}

// TransportCause finds the cause of a connection failure in a gRPC
// Unavailable message (`connection error: desc = "transport: Error while
// dialing: dial tcp …: connect: connection refused"`), and reports whether
// the message was about the connection at all.
func TransportCause(msg string) (string, bool) {
	const connError = "connection error: desc = "

	i := strings.Index(msg, connError)
	if i < 0 {
		return "", false
	}

	// gRPC quotes the description with %q: the cause may itself hold
	// escaped quotes (x509's "possibly because of \"…\"" hint), so it is
	// unquoted as Go does, not cut at the next quote.
	cause, rest := msg[i+len(connError):], ""
	if quoted, err := strconv.QuotedPrefix(cause); err == nil {
		if unquoted, err := strconv.Unquote(quoted); err == nil {
			cause, rest = unquoted, cause[len(quoted):]
		}
	}

	cause = strings.TrimPrefix(cause, "transport: ")
	cause = strings.TrimPrefix(cause, "Error while dialing: ")

	if strings.Contains(rest, "goaway") {
		cause += " (the endpoint closed the connection: it was stopping or restarting)"
	}

	return cause, true
}

// PermissionText is authz's refusal without its package prefix: it names
// the method, the roles that would allow it and the caller's.
func PermissionText(msg string) string { return strings.TrimPrefix(msg, "authz: ") }

// CodeWords is a status code as words: NotFound becomes "not found".
func CodeWords(c codes.Code) string {
	var b strings.Builder

	for i, r := range c.String() {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte(' ')
		}

		b.WriteRune(r)
	}

	return strings.ToLower(b.String())
}
