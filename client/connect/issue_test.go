package connect

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
)

// issuer answers GenerateClientConfiguration with resp or err.
type issuer struct {
	resp *machine.GenerateClientConfigurationResponse
	err  error
	req  *machine.GenerateClientConfigurationRequest
}

func (i *issuer) GenerateClientConfiguration(_ context.Context, req *machine.GenerateClientConfigurationRequest, _ ...grpc.CallOption) (*machine.GenerateClientConfigurationResponse, error) {
	i.req = req

	return i.resp, i.err
}

func TestIssueClientConfigRefusals(t *testing.T) {
	callErr := errors.New("unreachable")
	one := func(m *machine.GenerateClientConfiguration) *machine.GenerateClientConfigurationResponse {
		return &machine.GenerateClientConfigurationResponse{Messages: []*machine.GenerateClientConfiguration{m}}
	}

	for _, tc := range []struct {
		name string
		is   *issuer
		want string
	}{
		{"call error as it is", &issuer{err: callErr}, "unreachable"},
		{"no config", &issuer{resp: &machine.GenerateClientConfigurationResponse{}}, "0 client configs in the reply, want 1"},
		{"the node's failure", &issuer{resp: one(&machine.GenerateClientConfiguration{Metadata: &common.Metadata{Hostname: "cp", Error: "no CA"}})}, "no CA"},
		{"not a client config", &issuer{resp: one(&machine.GenerateClientConfiguration{Talosconfig: []byte("{")})}, "the issued client config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := IssueClientConfig(t.Context(), tc.is, []string{"os:reader"}, time.Hour)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}

			if tc.is.err != nil && !errors.Is(err, callErr) {
				t.Fatalf("err = %v, want the call's error as it is", err)
			}

			if r := tc.is.req; strings.Join(r.GetRoles(), ",") != "os:reader" || r.GetCrtTtl().AsDuration() != time.Hour {
				t.Fatalf("request %v, want roles os:reader and a ttl of 1h", r)
			}
		})
	}
}
