package apid

import (
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/aegis-os/aegis/api/certificates"
	"github.com/aegis-os/aegis/api/tokens"
)

func TestMethodKinds(t *testing.T) {
	tests := []struct {
		method              string
		oneRequest, streams bool
	}{
		{machine.MachineService_Version_FullMethodName, true, false},
		{machine.MachineService_Logs_FullMethodName, true, true},
		{machine.MachineService_Events_FullMethodName, true, true},
		{machine.MachineService_EtcdRecover_FullMethodName, false, false},
		{tokens.TokenService_Create_FullMethodName, true, false},
		{certificates.CertificateService_Renew_FullMethodName, true, false},
		// Unknown methods may take a stream: never the one-request path.
		{"/machine.MachineService/NoSuchMethod", false, false},
		{"/no.such.Service/Version", false, false},
		{"/machine.MachineService.Version", false, false},
		{"", false, false},
	}

	for _, tt := range tests {
		if got := takesOneRequest(tt.method); got != tt.oneRequest {
			t.Errorf("takesOneRequest(%q) = %v, want %v", tt.method, got, tt.oneRequest)
		}

		if got := streamsReplies(tt.method); got != tt.streams {
			t.Errorf("streamsReplies(%q) = %v, want %v", tt.method, got, tt.streams)
		}
	}
}
