package machineapi

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/logtest"
	"github.com/aegis-os/aegis/machined/certapi"
)

var internalMessage = regexp.MustCompile(`^machined: internal error \(ref ([0-9a-f]{20})\)$`)

// checkInternal checks that err is Internal carrying a reference and not
// cause, and that exactly one log line holds both the reference and cause.
func checkInternal(t *testing.T, sink *logtest.Sink, err error, method, cause string) {
	t.Helper()

	msg := status.Convert(err).Message()

	m := internalMessage.FindStringSubmatch(msg)
	if status.Code(err) != codes.Internal || m == nil || strings.Contains(msg, cause) {
		t.Fatalf("%s: %v, want Internal with a reference and without the cause", method, err)
	}

	if got := sink.Find(t, "request failed", logkey.RequestID, m[1], logkey.Error, cause, logkey.Method, method); len(got) != 1 {
		t.Fatalf("%s: %d log lines with reference %s and the cause, want 1:\n%s", method, len(got), m[1], sink)
	}
}

// failingIssuer answers IssueClientConfig with err.
type failingIssuer struct{ err error }

func (i failingIssuer) IssueClientConfig(role.Set, time.Duration) (_, _, _, _ []byte, err error) {
	return nil, nil, nil, nil, i.err
}

// TestGenerateClientConfigurationErrors: the node's refusals keep their
// codes and messages; any other failure is Internal with a reference.
func TestGenerateClientConfigurationErrors(t *testing.T) {
	tests := []struct {
		name string
		err  error
		code codes.Code
		msg  string
	}{
		{"worker", certapi.ErrNoCA, codes.FailedPrecondition, "client configurations are issued by control-plane nodes only"},
		{"clock not synced", certapi.ErrTimeNotSynced, codes.FailedPrecondition, certapi.ErrTimeNotSynced.Error()},
		{"CA refusal", fmt.Errorf("certs: %w", &ca.Error{Reason: ca.ReasonBadSubject, Detail: "no name"}), codes.InvalidArgument, "ca: invalid subject: no name"},
		{"broken node", errors.New("disk on fire"), codes.Internal, ""},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &logtest.Sink{}
			s := New(Config{ClientConfig: failingIssuer{tt.err}, Logger: sink.Logger()})

			_, err := s.GenerateClientConfiguration(context.Background(), &machine.GenerateClientConfigurationRequest{Roles: []string{"os:reader"}})
			if status.Code(err) != tt.code {
				t.Fatalf("%v, want %s", err, tt.code)
			}

			switch {
			case tt.code == codes.Internal:
				checkInternal(t, sink, err, "GenerateClientConfiguration", "disk on fire")
			case tt.msg != "" && status.Convert(err).Message() != tt.msg:
				t.Fatalf("message %q, want %q", status.Convert(err).Message(), tt.msg)
			}
		})
	}
}
