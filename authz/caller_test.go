package authz_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/aegis-os/aegis/authz"
)

func TestCallerMetadata(t *testing.T) {
	for _, tt := range []struct {
		name string
		md   metadata.MD
		want authz.Caller
		ok   bool
		bad  bool
	}{
		{name: "none", md: metadata.MD{}},
		{name: "both", md: metadata.Pairs(authz.CallerSerialMetadataKey, "1f", authz.CallerSubjectMetadataKey, "CN=ünïcode,O=os:admin"),
			want: authz.Caller{Serial: "1f", Subject: "CN=ünïcode,O=os:admin"}, ok: true},
		{name: "serial only", md: metadata.Pairs(authz.CallerSerialMetadataKey, "1f"), bad: true},
		{name: "subject only", md: metadata.Pairs(authz.CallerSubjectMetadataKey, "CN=x"), bad: true},
		{name: "upper-case hex", md: metadata.Pairs(authz.CallerSerialMetadataKey, "1F", authz.CallerSubjectMetadataKey, "CN=x"), bad: true},
		{name: "serial too long", md: metadata.Pairs(authz.CallerSerialMetadataKey, strings.Repeat("a", 41), authz.CallerSubjectMetadataKey, "CN=x"), bad: true},
		{name: "subject too long", md: metadata.Pairs(authz.CallerSerialMetadataKey, "1", authz.CallerSubjectMetadataKey, strings.Repeat("a", 1025)), bad: true},
		{name: "subject not UTF-8", md: metadata.Pairs(authz.CallerSerialMetadataKey, "1", authz.CallerSubjectMetadataKey, "\xff"), bad: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := authz.CallerFromMetadata(tt.md)
			if tt.bad {
				if !errors.Is(err, authz.ErrBadMetadata) {
					t.Fatalf("err = %v, want ErrBadMetadata", err)
				}

				return
			}

			if err != nil || ok != tt.ok || got != tt.want {
				t.Fatalf("got %+v, %v, %v; want %+v, %v", got, ok, err, tt.want, tt.ok)
			}
		})
	}

	// Set replaces what was there; an empty caller leaves none.
	md := metadata.Pairs(authz.CallerSerialMetadataKey, "aa", authz.CallerSubjectMetadataKey, "CN=old")
	authz.SetCallerMetadata(md, authz.Caller{Serial: "bb", Subject: "CN=new"})

	if c, _, _ := authz.CallerFromMetadata(md); c.Serial != "bb" || c.Subject != "CN=new" {
		t.Fatalf("after Set: %+v", c)
	}

	authz.SetCallerMetadata(md, authz.Caller{})

	if authz.HasCallerMetadata(md) {
		t.Fatalf("an empty caller left %v", md)
	}
}

func FuzzCallerMetadata(f *testing.F) {
	f.Add("1f", "CN=x,O=os:admin")
	f.Add("", "")
	f.Add("zz", "\xff")

	f.Fuzz(func(t *testing.T, serial, subject string) {
		c, ok, err := authz.CallerFromMetadata(metadata.Pairs(authz.CallerSerialMetadataKey, serial, authz.CallerSubjectMetadataKey, subject))
		if err != nil {
			return
		}

		if !ok || c.Serial != serial || c.Subject != subject || len(serial) > authz.MaxCallerSerialLength || len(subject) > authz.MaxCallerSubjectLength {
			t.Fatalf("accepted %q %q as %+v", serial, subject, c)
		}
	})
}
