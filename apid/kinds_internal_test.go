package apid

import "testing"

func TestMethodKinds(t *testing.T) {
	tests := []struct {
		method              string
		oneRequest, streams bool
	}{
		{"/machine.MachineService/Version", true, false},
		{"/machine.MachineService/Logs", true, true},
		{"/machine.MachineService/Events", true, true},
		{"/machine.MachineService/EtcdRecover", false, false},
		{"/aegis.tokens.TokenService/Create", true, false},
		{"/aegis.certificates.CertificateService/Renew", true, false},
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
