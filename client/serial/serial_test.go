package serial_test

import (
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/aegis-os/aegis/client/serial"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct{ in, want, bad string }{
		{in: "1a2B", want: "1a2b"},
		{in: "0x00ff", want: "ff"},
		{in: "01:AB:cd", want: "1abcd"},
		{in: "  7f\n", want: "7f"},
		{in: strings.Repeat("f", serial.MaxLength), want: strings.Repeat("f", serial.MaxLength)},
		{in: "", bad: "want 1 to 40 hexadecimal digits"},
		{in: "0x", bad: "want 1 to 40 hexadecimal digits"},
		{in: strings.Repeat("f", serial.MaxLength+1), bad: "want 1 to 40 hexadecimal digits"},
		{in: "0", bad: "is not a positive hexadecimal number"},
		{in: "xyz", bad: "is not a positive hexadecimal number"},
		{in: "-1", bad: "is not a positive hexadecimal number"},
		{in: strings.Repeat("g", 60), bad: strings.Repeat("g", 48) + "…"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := serial.Parse(tc.in)
			if tc.bad != "" {
				var refusal *serial.Error
				if err == nil || !strings.Contains(err.Error(), tc.bad) || !errors.As(err, &refusal) {
					t.Fatalf("Parse(%q) = %q, %v; want a *serial.Error containing %q", tc.in, got, err, tc.bad)
				}

				return
			}

			if err != nil || got != tc.want {
				t.Fatalf("Parse(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestOfIsParsed(t *testing.T) {
	n, _ := new(big.Int).SetString("00abcdef0123456789", 16)
	if got, err := serial.Parse(serial.Of(n)); err != nil || got != serial.Of(n) {
		t.Fatalf("Parse(Of(n)) = %q, %v; want %q", got, err, serial.Of(n))
	}
}
