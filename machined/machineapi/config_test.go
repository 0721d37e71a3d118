package machineapi

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/certs"
)

// fakeConfigurator records the change it is given and answers with err.
type fakeConfigurator struct {
	got *ConfigChange
	err error
}

func (f *fakeConfigurator) ApplyConfig(_ context.Context, ch ConfigChange) (ConfigResult, error) {
	f.got = &ch

	return ConfigResult{Mode: machine.ApplyConfigurationRequest_NO_REBOOT, Details: "done"}, f.err
}

func (f *fakeConfigurator) MachineConfig(bool) ([]byte, bool, error) { return []byte("x"), false, nil }

func TestApplyConfigurationRequests(t *testing.T) {
	problems := &certs.ValidationError{What: "new", Problems: []certs.Problem{{Path: "version", Message: "bad"}, {Path: "machine.type", Message: "bad"}}}

	tests := []struct {
		name    string
		req     *machine.ApplyConfigurationRequest
		answer  error
		code    codes.Code
		reached bool
		timeout time.Duration
	}{
		{name: "empty", req: &machine.ApplyConfigurationRequest{}, code: codes.InvalidArgument},
		{name: "unknown mode", req: &machine.ApplyConfigurationRequest{Data: []byte("x"), Mode: 9}, code: codes.InvalidArgument},
		{name: "too large", req: &machine.ApplyConfigurationRequest{Data: make([]byte, MaxConfigSize+1)}, code: codes.InvalidArgument},
		{name: "try too long", req: &machine.ApplyConfigurationRequest{
			Data: []byte("x"), Mode: machine.ApplyConfigurationRequest_TRY, TryModeTimeout: durationpb.New(MaxTryTimeout + time.Second),
		}, code: codes.InvalidArgument},
		{name: "try default", req: &machine.ApplyConfigurationRequest{Data: []byte("x"), Mode: machine.ApplyConfigurationRequest_TRY},
			code: codes.OK, reached: true, timeout: DefaultTryTimeout},
		{name: "problems", req: &machine.ApplyConfigurationRequest{Data: []byte("x")}, answer: problems, code: codes.InvalidArgument, reached: true},
		{name: "needs reboot", req: &machine.ApplyConfigurationRequest{Data: []byte("x")},
			answer: Refuse(ErrNotHere, "mode no-reboot: machine.certSANs"), code: codes.FailedPrecondition, reached: true},
		{name: "internal", req: &machine.ApplyConfigurationRequest{Data: []byte("x")}, answer: errors.New("disk on fire"), code: codes.Internal, reached: true},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeConfigurator{err: tt.answer}
			s := New(Config{Config: f})

			resp, err := s.ApplyConfiguration(context.Background(), tt.req)
			if status.Code(err) != tt.code {
				t.Fatalf("code %v (%v), want %v", status.Code(err), err, tt.code)
			}

			if (f.got != nil) != tt.reached {
				t.Fatalf("reached the node: %v, want %v", f.got != nil, tt.reached)
			}

			if tt.code == codes.InvalidArgument && tt.answer != nil && status.Convert(err).Message() != problems.Error() {
				t.Errorf("problems not passed on whole: %v", err)
			}

			if tt.code == codes.Internal && status.Convert(err).Message() == "disk on fire" {
				t.Error("internal cause sent to the caller")
			}

			if tt.code == codes.OK {
				if f.got.TryTimeout != tt.timeout || resp.GetMessages()[0].GetModeDetails() != "done" {
					t.Errorf("timeout %s, reply %v", f.got.TryTimeout, resp)
				}
			}
		})
	}
}
