package role

import (
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      []string
		want    []string
		wantErr bool
	}{
		{name: "admin", in: []string{"os:admin"}, want: []string{"os:admin"}},
		{name: "order is stable", in: []string{"os:reader", "os:admin"}, want: []string{"os:admin", "os:reader"}},
		{name: "spaces trimmed", in: []string{" os:operator "}, want: []string{"os:operator"}},
		{name: "empty list", in: nil, want: []string{}},
		{name: "unknown", in: []string{"os:root"}, wantErr: true},
		{name: "case matters", in: []string{"OS:ADMIN"}, wantErr: true},
		{name: "duplicate", in: []string{"os:reader", "os:reader"}, wantErr: true},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Parse(%q) = %v, want error", tt.in, got)
				}

				return
			}

			if err != nil {
				t.Fatal(err)
			}

			if !slices.Equal(got.Strings(), tt.want) {
				t.Fatalf("Parse(%q) = %q, want %q", tt.in, got.Strings(), tt.want)
			}
		})
	}
}

func TestFromOrganizationSeparatesUnknown(t *testing.T) {
	set, unknown := FromOrganization([]string{"os:reader", "acme", "os:admin", "OS:ADMIN"})

	if got := set.Strings(); !slices.Equal(got, []string{"os:admin", "os:reader"}) {
		t.Fatalf("roles = %q", got)
	}

	if !slices.Equal(unknown, []string{"acme", "OS:ADMIN"}) {
		t.Fatalf("unknown = %q", unknown)
	}
}
