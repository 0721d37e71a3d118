package authz

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"unicode/utf8"

	"google.golang.org/grpc/metadata"
)

// Metadata keys of the original caller of a call forwarded apid to apid.
// The node that forwards names the client whose certificate it verified;
// the node it forwards to records that client, not the forwarding node, in
// its request log and in machined's credential audit. Like talos-role they
// are believed only from an os:impersonator peer (another node's apid) and
// on machined's socket; apid refuses a call that carries them from anyone
// else, and replaces them on every hop.
const (
	CallerSerialMetadataKey = "aegis-caller-serial"
	// CallerSubjectMetadataKey is binary (-bin): a subject may hold any
	// UTF-8, which plain metadata values may not.
	CallerSubjectMetadataKey = "aegis-caller-subject-bin"
)

// ErrCallerNotAllowed refuses a call that names a caller in metadata from a
// peer that is not another node's apid.
var ErrCallerNotAllowed = errors.New("authz: only another node's apid may name the original caller")

// Caller is who made a call: the certificate's serial (hex) and subject.
type Caller struct {
	Serial  string
	Subject string
	// Via is the subject of the node that forwarded the call, empty for a
	// call made to this node directly.
	Via string
}

// CallerOfCertificate is the Caller a certificate names.
func CallerOfCertificate(c *x509.Certificate) Caller {
	return Caller{Serial: c.SerialNumber.Text(16), Subject: c.Subject.String()}
}

type callerKey struct{}

// CallerFromContext returns the call's caller as the role injector decided
// it: the original client of a forwarded call, else the peer certificate's.
func CallerFromContext(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)

	return c, ok
}

func contextWithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// SetCallerMetadata replaces the caller in md with c.
func SetCallerMetadata(md metadata.MD, c Caller) {
	md.Delete(CallerSerialMetadataKey)
	md.Delete(CallerSubjectMetadataKey)

	if c.Serial != "" {
		md.Set(CallerSerialMetadataKey, c.Serial)
		md.Set(CallerSubjectMetadataKey, c.Subject)
	}
}

// HasCallerMetadata reports whether md names a caller at all.
func HasCallerMetadata(md metadata.MD) bool {
	return len(md.Get(CallerSerialMetadataKey)) > 0 || len(md.Get(CallerSubjectMetadataKey)) > 0
}

// CallerFromMetadata reads the caller md names; ok is false when it names
// none. Only a hop that may name callers (see the keys) may believe it.
func CallerFromMetadata(md metadata.MD) (c Caller, ok bool, err error) {
	if !HasCallerMetadata(md) {
		return Caller{}, false, nil
	}

	serials, subjects := md.Get(CallerSerialMetadataKey), md.Get(CallerSubjectMetadataKey)
	if len(serials) != 1 || len(subjects) != 1 {
		return Caller{}, false, fmt.Errorf("%w: the caller takes one serial and one subject", ErrBadMetadata)
	}

	serial, subject := serials[0], subjects[0]

	switch {
	case serial == "" || len(serial) > MaxCallerSerialLength || !isHex(serial):
		return Caller{}, false, fmt.Errorf("%w: caller serial is not a serial number in hex", ErrBadMetadata)
	case len(subject) > MaxCallerSubjectLength || !utf8.ValidString(subject):
		return Caller{}, false, fmt.Errorf("%w: caller subject is not UTF-8 of at most %d bytes", ErrBadMetadata, MaxCallerSubjectLength)
	}

	return Caller{Serial: serial, Subject: subject}, true, nil
}

func isHex(s string) bool {
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}

	return true
}
