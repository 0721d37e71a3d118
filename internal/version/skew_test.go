package version

import (
	"errors"
	"testing"
)

func TestCheckUpgrade(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		want     error
	}{
		{"v0.2.0", "v0.2.0", nil},
		{"v0.2.0", "v0.2.3", nil},
		{"v0.2.5", "v0.3.0", nil},
		{"v0.2.0-rc.1", "v0.2.0", nil},
		{"v1.4.2", "v1.5.0-rc.1", nil},
		{"v0.1.0-dev+gaaaa", "v0.1.0-dev+gbbbb", nil},
		{"v0.2.0", "v0.4.0", ErrSkew},
		{"v0.9.0", "v1.0.0", ErrSkew},
		{"v1.0.0", "v0.9.0", ErrSkew},
		{"v0.3.0", "v0.2.9", ErrDowngrade},
		{"v0.3.1", "v0.3.0", ErrDowngrade},
		{"v0.3.0", "v0.3.0-rc.1", ErrDowngrade},
		{"v0.3.0", "0.3.1", ErrNotSemver},
		{"garbage", "v0.3.1", ErrNotSemver},
	} {
		t.Run(tc.from+"→"+tc.to, func(t *testing.T) {
			err := CheckUpgrade(tc.from, tc.to)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("CheckUpgrade(%s, %s) = %v, want %v", tc.from, tc.to, err, tc.want)
			}
		})
	}
}

func TestInteroperate(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"v0.2.0", "v0.2.7", true},
		{"v0.2.0", "v0.3.1", true},
		{"v0.3.1", "v0.2.0", true},
		{"v0.2.0", "v0.4.0", false},
		{"v1.0.0", "v0.9.0", false},
		{"v1.2.0", "x", false},
	} {
		if got := Interoperate(tc.a, tc.b); got != tc.want {
			t.Errorf("Interoperate(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
