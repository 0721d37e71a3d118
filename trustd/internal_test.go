package trustd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/token"
)

func TestTokenFromMetadata(t *testing.T) {
	tests := []struct {
		name string
		md   metadata.MD
		ok   bool
	}{
		{name: "one valid", md: metadata.Pairs("token", "abcdef.0123456789abcdef"), ok: true},
		{name: "key case folded by gRPC", md: metadata.Pairs("Token", "abcdef.0123456789abcdef"), ok: true},
		{name: "none", md: metadata.MD{}},
		{name: "empty value", md: metadata.Pairs("token", "")},
		{name: "two values", md: metadata.Pairs("token", "abcdef.0123456789abcdef", "token", "abcdef.0123456789abcdef")},
		{name: "malformed", md: metadata.Pairs("token", "abcdef.0123456789ABCDEF")},
		{name: "padded", md: metadata.Pairs("token", " abcdef.0123456789abcdef")},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := tokenFromMetadata(tt.md)
			if tt.ok != (err == nil) {
				t.Fatalf("err = %v, want ok=%v", err, tt.ok)
			}

			if err != nil && !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("refusal does not wrap ErrInvalidToken: %v", err)
			}

			if err == nil && tok.Reveal() != tt.md.Get("token")[0] {
				t.Fatalf("token = %v", tok)
			}
		})
	}
}

// FuzzTokenFromMetadata feeds arbitrary token metadata: the parser must
// accept exactly the token form and never put the value in its error.
func FuzzTokenFromMetadata(f *testing.F) {
	f.Add("abcdef.0123456789abcdef", "")
	f.Add("abcdef.0123456789abcdef", "abcdef.0123456789abcdef")
	f.Add("", "")
	f.Add("abcdef.0123456789abcdeF", "")

	f.Fuzz(func(t *testing.T, first, second string) {
		md := metadata.MD{"token": {first}}
		if second != "" {
			md.Append("token", second)
		}

		tok, err := tokenFromMetadata(md)
		if err != nil {
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("refusal does not wrap ErrInvalidToken: %v", err)
			}

			if len(first) >= 4 && strings.Contains(err.Error(), first) {
				t.Fatalf("error repeats the value: %v", err)
			}

			return
		}

		if second != "" {
			t.Fatal("two values accepted")
		}

		if _, perr := token.Parse(first); perr != nil || tok.Reveal() != first {
			t.Fatalf("accepted %q as %v", first, tok)
		}
	})
}

func TestToStatus(t *testing.T) {
	tests := []struct {
		err     error
		code    codes.Code
		message string
	}{
		{err: fmt.Errorf("%w: tokenstore: token revoked", ErrInvalidToken), code: codes.Unauthenticated, message: "trustd: invalid token"},
		{err: ErrTimeNotSynced, code: codes.FailedPrecondition, message: "trustd: time not synced"},
		{err: fmt.Errorf("%w: ca: URI SAN", ErrBadRequest), code: codes.InvalidArgument, message: "trustd: bad certificate request: ca: URI SAN"},
		{err: ErrRateLimited, code: codes.ResourceExhausted, message: ErrRateLimited.Error()},
		{err: errors.New("boltstore: disk on fire"), code: codes.Internal, message: "trustd: internal error (ref r1)"},
	}

	for _, tt := range tests {
		t.Run(tt.code.String(), func(t *testing.T) {
			st := status.Convert(toStatus(tt.err, "r1"))
			if st.Code() != tt.code || st.Message() != tt.message {
				t.Fatalf("status = %s %q, want %s %q", st.Code(), st.Message(), tt.code, tt.message)
			}
		})
	}
}

func TestSourceOf(t *testing.T) {
	tests := []struct {
		name string
		addr net.Addr
		want string
	}{
		{name: "IPv4", addr: &net.TCPAddr{IP: net.ParseIP("127.0.1.5"), Port: 1}, want: "127.0.1.5"},
		{name: "IPv4-mapped", addr: &net.TCPAddr{IP: net.ParseIP("::ffff:127.0.1.5"), Port: 1}, want: "127.0.1.5"},
		{name: "IPv6", addr: &net.TCPAddr{IP: net.ParseIP("fd00::5"), Port: 1}, want: "fd00::5"},
		{name: "Unix socket", addr: &net.UnixAddr{Name: "/run/x.sock", Net: "unix"}, want: "local"},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: tt.addr})
			if got := sourceString(sourceOf(ctx)); got != tt.want {
				t.Fatalf("source = %s, want %s", got, tt.want)
			}
		})
	}

	if got := sourceString(sourceOf(context.Background())); got != "local" {
		t.Fatalf("no peer: %s", got)
	}
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }
