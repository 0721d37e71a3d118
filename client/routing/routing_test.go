package routing_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aegis-os/aegis/client/routing"
)

func TestCanonical(t *testing.T) {
	for _, tc := range []struct {
		in, want, bad string
	}{
		{in: "10.0.0.1", want: "10.0.0.1"},
		{in: "::ffff:10.0.0.1", want: "10.0.0.1"},
		{in: "[fd00::1]", want: "fd00::1"},
		{in: "FD00:0::0001", want: "fd00::1"},
		{in: "Worker-1.Example.", want: "worker-1.example"},
		{in: "", bad: "node name of 0 bytes"},
		{in: strings.Repeat("a", routing.MaxLength+1), bad: "node name of 254 bytes"},
		{in: "10.0.0.1:50000", bad: `node "10.0.0.1:50000": ports are not allowed`},
		{in: "cp.example:", bad: "ports are not allowed"},
		{in: "[fd00::1]:22", bad: "ports are not allowed"},
		{in: "fe80::1%eth0", bad: "zones are not allowed"},
		{in: "0.0.0.0", bad: "is not a node address"},
		{in: "ff02::1", bad: "is not a node address"},
		{in: "255.255.255.255", bad: "is not a node address"},
		{in: "https://cp.example", bad: "is not an IP address or a DNS name"},
		{in: "*.example", bad: "is not an IP address or a DNS name"},
		{in: "user@cp.example", bad: "is not an IP address or a DNS name"},
		{in: "[cp.example]", bad: "is not an IP address or a DNS name"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := routing.Canonical(tc.in)
			if tc.bad != "" {
				var refusal *routing.Error
				if err == nil || !strings.Contains(err.Error(), tc.bad) || !errors.As(err, &refusal) {
					t.Fatalf("Canonical(%q) = %q, %v; want a *routing.Error containing %q", tc.in, got, err, tc.bad)
				}

				return
			}

			if err != nil || got != tc.want {
				t.Fatalf("Canonical(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

// FuzzCanonical: whatever a caller names, the canonical form is a fixed
// point and carries no port, path, user or zone.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{"10.0.0.1", "[fd00::1]", "cp.example.", "a:1", "fe80::1%lo", "::ffff:1.2.3.4"} {
		f.Add(s)
	}

	f.Fuzz(func(t *testing.T, in string) {
		got, err := routing.Canonical(in)
		if err != nil {
			return
		}

		if strings.ContainsAny(got, "/@%[] \t\n") {
			t.Fatalf("Canonical(%q) = %q: unsafe characters", in, got)
		}

		if again, err := routing.Canonical(got); err != nil || again != got {
			t.Fatalf("Canonical(%q) = %q is not a fixed point: %q, %v", in, got, again, err)
		}
	})
}
