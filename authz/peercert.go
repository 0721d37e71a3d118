package authz

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/metadata"

	"github.com/aegis-os/aegis/api/certificates"
	"github.com/aegis-os/aegis/api/revocations"
	"github.com/aegis-os/aegis/api/rotation"
	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/internal/wire"
)

// ErrNoPeerCertificate is returned when a call carries no certificate in
// wire.MetadataClientCertificate, or one that does not parse.
var ErrNoPeerCertificate = errors.New("authz: no caller certificate passed on")

// NeedsPeerCertificate reports whether apid passes the caller's verified
// certificate on with calls of method: renewal keeps the presented
// certificate's roles, name and lifetime, which roles alone do not carry;
// the methods that hand out or withdraw other credentials (client
// configurations, join tokens, client certificates) name the caller's
// certificate in their audit record, and a CA rotation records who started it.
func NeedsPeerCertificate(method string) bool {
	switch method {
	case certificates.CertificateService_Renew_FullMethodName,
		machine.MachineService_GenerateClientConfiguration_FullMethodName,
		tokens.TokenService_Create_FullMethodName,
		tokens.TokenService_Revoke_FullMethodName,
		revocations.RevocationService_Revoke_FullMethodName,
		rotation.RotationService_Put_FullMethodName:
		return true
	default:
		return false
	}
}

// SetCertificateMetadata replaces the certificate in md with leaf (none
// for a nil leaf).
func SetCertificateMetadata(md metadata.MD, leaf *x509.Certificate) {
	md.Delete(wire.MetadataClientCertificate)

	if leaf != nil {
		md.Set(wire.MetadataClientCertificate, base64.StdEncoding.EncodeToString(leaf.Raw))
	}
}

// CertificateFromMetadata returns the certificate apid passed on with the
// incoming call. Only a listener nobody but apid can reach may believe it.
func CertificateFromMetadata(ctx context.Context) (*x509.Certificate, error) {
	md, _ := metadata.FromIncomingContext(ctx)

	values := md.Get(wire.MetadataClientCertificate)
	if len(values) != 1 {
		return nil, fmt.Errorf("%w: %d values", ErrNoPeerCertificate, len(values))
	}

	der, err := base64.StdEncoding.DecodeString(values[0])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoPeerCertificate, err)
	}

	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoPeerCertificate, err)
	}

	return cert, nil
}
