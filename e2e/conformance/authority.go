package conformance

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aegis-os/aegis/api/certificates"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/wire"
)

// authorityCases are what a token or a certificate can obtain: a token
// never a certificate for a control plane's address or name, and by
// default only for the caller's own address; a renewal never more than
// the presented certificate holds; a lifetime that cannot be used is the
// caller's mistake.
func authorityCases() []*Case {
	restricted := func(e *Env) string { return e.tokens.restricted }

	return []*Case{
		tokenCase("static token: certificate naming the control plane's address", codes.PermissionDenied, staticToken,
			func(e *Env, source string) []string { return []string{source, e.Target} }),
		tokenCase("static token: certificate naming the control plane's name", codes.PermissionDenied, staticToken,
			func(e *Env, source string) []string { return []string{source, e.targetName()} }),
		tokenCase("static token: certificate naming a worker's name, held by that worker", codes.PermissionDenied, staticToken,
			func(e *Env, source string) []string { return []string{source, e.nodeName(e.Worker)} }),
		tokenCase("static token: certificate for a worker's address, not the caller's", codes.InvalidArgument, staticToken,
			func(e *Env, _ string) []string { return []string{e.Worker} }),
		tokenCase("token allowing the control plane's network: its address still refused", codes.PermissionDenied, restricted,
			func(e *Env, _ string) []string { return []string{"conformance-1.example", e.Target} }),
		renewCase("renewal: a one-hour reader asks for a year with talos-role os:admin", codes.OK,
			func(ids *identities) Identity { return ids.reader }, ""),
		renewCase("renewal with an impersonator certificate sending talos-role os:admin", codes.PermissionDenied,
			func(ids *identities) Identity { return ids.impersonator }, ""),
		renewCase("renewal asking for another common name", codes.InvalidArgument,
			func(ids *identities) Identity { return ids.reader }, "conformance-root"),
		crtTTLCase("1ns", durationpb.New(time.Nanosecond)),
		crtTTLCase("1ms", durationpb.New(time.Millisecond)),
		crtTTLCase("malformed (negative nanos)", &durationpb.Duration{Seconds: 1, Nanos: -1}),
	}
}

// targetName is the target control plane's node name, which its server
// certificate carries.
func (e *Env) targetName() string { return e.nodeName(e.Target) }

// nodeName is the name of the node at address, which its certificate
// carries (the address itself when no node has it).
func (e *Env) nodeName(address string) string {
	for _, n := range e.cluster.Nodes {
		if n.Address == address {
			return n.Name
		}
	}

	return address
}

// tokenCase asks the target's trustd, with tok, for a certificate whose
// common name is the first of the hosts names gives and whose SANs are
// all of them.
func tokenCase(name string, want codes.Code, tok func(*Env) string, names func(e *Env, source string) []string) *Case {
	return &Case{
		Group: "trustd", Name: name, Expected: want.String(),
		Run: func(ctx context.Context, e *Env, r *Report) string {
			csr := func(source string) ([]byte, error) {
				hosts := names(e, source)

				return namedHosts(hosts[0], hosts)
			}

			return e.certifyAndCheck(ctx, e.Target, []string{wire.MetadataToken, tok(e)}, csr, want, r)
		},
	}
}

// namedHosts is a request for cn with hosts as its SANs.
func namedHosts(cn string, hosts []string) ([]byte, error) {
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}}

	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}

	return edCSR(tmpl)()
}

// renewCase renews the identity id picks through the target's apid, with
// talos-role: os:admin and a year asked for; cn overrides the request's
// common name. An issued certificate must keep the presented roles, name
// and at most its lifetime.
func renewCase(name string, want codes.Code, pick func(*identities) Identity, cn string) *Case {
	return &Case{
		Group: "apid", Name: name, Expected: want.String(),
		Run: func(ctx context.Context, e *Env, r *Report) string {
			id := pick(e.ids)
			presented := id.Chain[0]

			if cn == "" {
				cn = presented.Subject.CommonName
			}

			resp, err := e.renew(ctx, id, cn)
			if err == nil {
				checkRenewed(resp, presented, r)
			}

			return codeOf(err)
		},
	}
}

func (e *Env) renew(ctx context.Context, id Identity, cn string) (*certificates.RenewResponse, error) {
	conn, err := e.dial(e.Target, id)
	if err != nil {
		return nil, err
	}
	defer conn.Close()

	key, err := ca.GenerateKey(ca.Ed25519, nil)
	if err != nil {
		return nil, err
	}

	csr, err := ca.NewCSR(key, cn, nil)
	if err != nil {
		return nil, err
	}

	ctx = metadata.AppendToOutgoingContext(ctx, wire.MetadataRole, string(role.Admin))

	return certificates.NewCertificateServiceClient(conn).Renew(ctx,
		&certificates.RenewRequest{Csr: csr, Ttl: durationpb.New(365 * 24 * time.Hour)})
}

func checkRenewed(resp *certificates.RenewResponse, presented *x509.Certificate, r *Report) {
	if len(resp.GetMessages()) != 1 {
		r.Problemf("%d certificates in the reply", len(resp.GetMessages()))

		return
	}

	cert, err := ca.ParseCertificate(resp.GetMessages()[0].GetCrt())
	if err != nil {
		r.Problemf("renewed certificate: %v", err)

		return
	}

	orgs := slices.Sorted(slices.Values(cert.Subject.Organization))
	life, limit := cert.NotAfter.Sub(cert.NotBefore), presented.NotAfter.Sub(presented.NotBefore)

	if !slices.Equal(orgs, slices.Sorted(slices.Values(presented.Subject.Organization))) {
		r.Problemf("renewed with roles %v, presented %v", orgs, presented.Subject.Organization)
	}

	if life > limit {
		r.Problemf("renewed for %s, the presented certificate lives %s", life, limit)
	}

	if cert.Subject.CommonName != presented.Subject.CommonName {
		r.Problemf("renewed as %q, presented %q", cert.Subject.CommonName, presented.Subject.CommonName)
	}
}

// crtTTLCase asks the target for a client configuration with a lifetime
// it cannot issue: InvalidArgument naming crt_ttl, never Internal.
func crtTTLCase(what string, ttl *durationpb.Duration) *Case {
	return &Case{
		Group: "apid", Name: "GenerateClientConfiguration with crt_ttl " + what, Expected: codes.InvalidArgument.String(),
		Run: func(ctx context.Context, e *Env, r *Report) string {
			conn, err := e.admin(e.Target)
			if err != nil {
				r.Problemf("%v", err)

				return "not run"
			}

			_, err = machine.NewMachineServiceClient(conn).GenerateClientConfiguration(ctx,
				&machine.GenerateClientConfigurationRequest{Roles: []string{string(role.Reader)}, CrtTtl: ttl})
			if err != nil && !strings.Contains(status.Convert(err).Message(), "crt_ttl") {
				r.Problemf("the refusal does not name crt_ttl: %v", err)
			}

			return codeOf(err)
		},
	}
}
