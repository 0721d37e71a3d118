package apid

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/logtest"
)

// TestInternalCarriesReference: an internal error reaches the caller as a
// reference, and the one log line with the cause has the same reference.
// A node's reply apid cannot tag used to reach the caller as its cause.
// (A recovered panic answers the same way: TestPanicIsRecovered.)
func TestInternalCarriesReference(t *testing.T) {
	sink := &logtest.Sink{}
	s := &Server{log: sink.Logger()}
	ref := regexp.MustCompile(`^apid: internal error \(ref ([0-9a-f]{20})\)$`)

	for name, err := range map[string]error{
		"call": s.toStatus("/machine.MachineService/Version", errors.New("tag: reply field 1 is not bytes")),
	} {
		msg := status.Convert(err).Message()

		m := ref.FindStringSubmatch(msg)
		if status.Code(err) != codes.Internal || m == nil {
			t.Fatalf("%s: %v, want Internal with a reference", name, err)
		}

		if strings.Contains(msg, "reply field") || strings.Contains(msg, "index") {
			t.Fatalf("%s: the cause reached the caller: %q", name, msg)
		}

		var got []map[string]any

		for _, r := range sink.Records(t) {
			if r[logkey.RequestID] == m[1] && r[logkey.Error] != nil {
				got = append(got, r)
			}
		}

		if len(got) != 1 {
			t.Fatalf("%s: want one log line with reference %s and the cause:\n%s", name, m[1], sink)
		}
	}
}
