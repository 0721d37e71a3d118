package ca

import (
	"slices"
	"testing"
)

func TestServerHosts(t *testing.T) {
	tests := []struct {
		hostname  string
		addresses []string
		sans      []string
		want      []string
	}{
		{hostname: "cp-1", addresses: []string{"127.5.0.2"}, sans: []string{"cp.example"}, want: []string{"127.5.0.2", "127.0.0.1", "cp-1", "cp.example"}},
		{hostname: "cp-1", addresses: []string{"127.0.0.1"}, sans: []string{"cp-1", "127.0.0.1"}, want: []string{"127.0.0.1", "cp-1"}},
		{hostname: "Not A DNS Name!", addresses: []string{"10.0.0.1"}, want: []string{"10.0.0.1", "127.0.0.1"}},
	}

	for _, tt := range tests {
		if got := ServerHosts(tt.hostname, tt.addresses, tt.sans); !slices.Equal(got, tt.want) {
			t.Errorf("ServerHosts(%q, %v, %v) = %v, want %v", tt.hostname, tt.addresses, tt.sans, got, tt.want)
		}
	}
}
