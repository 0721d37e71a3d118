package apid_test

import (
	"encoding/base64"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/certificates"
	"github.com/aegis-os/aegis/apid/apidtest"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/machined/certapi"
)

// issuerOf lets the node's certificate service sign with the test PKI.
type issuerOf struct{ p *apidtest.PKI }

func (i issuerOf) ClientIssuer() (*ca.Issuer, []byte, error) {
	return i.p.Issuer(), i.p.CA.CertPEM, nil
}

// A renewal goes through apid with the certificate the handshake verified:
// the renewed certificate keeps its roles and lifetime whatever talos-role
// or certificate metadata the caller sends, and an impersonator (another
// node's apid) cannot renew, whatever roles it passes.
func TestRenewKeepsThePresentedCertificate(t *testing.T) {
	p := apidtest.NewPKI(t)
	node := apidtest.StartNode(t, p, apidtest.NodeConfig{IP: testIP, Register: func(g *grpc.Server) {
		certapi.New(certapi.Config{Authority: issuerOf{p}}).Register(g)
	}})

	reader := p.Client(t, role.Reader)
	admin := p.Client(t, role.Admin)
	forged := metadata.Pairs(wire.MetadataRole, string(role.Admin),
		wire.MetadataClientCertificate, base64.StdEncoding.EncodeToString(admin.Cert.Raw))

	renew := func(pair apidtest.Pair) (*certificates.RenewResponse, error) {
		c := apidtest.TalosClient(t, node.Addr, p.ClientTLS(t, pair))
		csr, err := ca.NewCSR(catest.Key(t, ca.Ed25519), pair.Cert.Subject.CommonName, nil)
		if err != nil {
			t.Fatal(err)
		}

		return certificates.NewCertificateServiceClient(c.Conn()).Renew(metadata.NewOutgoingContext(testCtx(t), forged),
			&certificates.RenewRequest{Csr: csr})
	}

	resp, err := renew(reader)
	if err != nil {
		t.Fatal(err)
	}

	cert, err := ca.ParseCertificate(resp.GetMessages()[0].GetCrt())
	if err != nil {
		t.Fatal(err)
	}

	life, want := cert.NotAfter.Sub(cert.NotBefore), reader.Cert.NotAfter.Sub(reader.Cert.NotBefore)
	if len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != string(role.Reader) || life > want {
		t.Fatalf("renewed: roles %v, lifetime %s; want os:reader, at most %s", cert.Subject.Organization, life, want)
	}

	if _, err = renew(p.Impersonator(t)); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("impersonator renewal: %v, want PermissionDenied", err)
	}
}
