package authz_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/metadata"

	"github.com/aegis-os/aegis/api/certificates"
	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/internal/wire"
)

func TestCertificateMetadata(t *testing.T) {
	iss := catest.NewIssuer(t, catest.NewCA(t, ca.Ed25519, testutil.Epoch), testutil.Epoch)
	cert := catest.Issue(t, iss, catest.Key(t, ca.Ed25519), ca.ProfileClient, time.Hour, role.Reader).Cert

	set := metadata.MD{}
	authz.SetCertificateMetadata(set, cert)

	tests := []struct {
		name string
		md   metadata.MD
		ok   bool
	}{
		{name: "set by apid", md: set, ok: true},
		{name: "none", md: metadata.MD{}},
		{name: "two values", md: metadata.MD{wire.MetadataClientCertificate: append(set.Get(wire.MetadataClientCertificate), set.Get(wire.MetadataClientCertificate)...)}},
		{name: "not base64", md: metadata.Pairs(wire.MetadataClientCertificate, "%%%")},
		{name: "not a certificate", md: metadata.Pairs(wire.MetadataClientCertificate, "AAAA")},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := authz.CertificateFromMetadata(metadata.NewIncomingContext(context.Background(), tt.md))
			if tt.ok {
				if err != nil || !got.Equal(cert) {
					t.Fatalf("got %v, %v", got, err)
				}

				return
			}

			if !errors.Is(err, authz.ErrNoPeerCertificate) {
				t.Fatalf("err = %v, want ErrNoPeerCertificate", err)
			}
		})
	}

	authz.SetCertificateMetadata(set, nil)
	if len(set.Get(wire.MetadataClientCertificate)) != 0 {
		t.Fatal("a nil certificate left a value")
	}
}

func TestNeedsPeerCertificate(t *testing.T) {
	for method, want := range map[string]bool{
		certificates.CertificateService_Renew_FullMethodName:              true,
		machine.MachineService_GenerateClientConfiguration_FullMethodName: true,
		tokens.TokenService_Create_FullMethodName:                         true,
		tokens.TokenService_Revoke_FullMethodName:                         true,
		machine.MachineService_Version_FullMethodName:                     false,
		tokens.TokenService_List_FullMethodName:                           false,
	} {
		if authz.NeedsPeerCertificate(method) != want {
			t.Errorf("NeedsPeerCertificate(%s) = %v", method, !want)
		}
	}
}
