package conformance

import (
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"time"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
)

// Identity is what a client presents in its TLS handshake: a chain (leaf
// first) and the leaf's key, or nothing at all.
type Identity struct {
	Name  string
	Chain []*x509.Certificate
	Key   crypto.Signer
}

// TLSCertificate returns the identity for a tls.Config; none for an empty
// identity.
func (id Identity) TLSCertificate() []tls.Certificate {
	if len(id.Chain) == 0 {
		return nil
	}

	c := tls.Certificate{PrivateKey: id.Key, Leaf: id.Chain[0]}
	for _, cert := range id.Chain {
		c.Certificate = append(c.Certificate, cert.Raw)
	}

	return []tls.Certificate{c}
}

// identities are every client the cases present.
type identities struct {
	admin, operator, reader, etcdBackup, impersonator Identity

	unknownRoles, noRoles, selfSigned, otherCA, forgedAdmin Identity
	expired, notYetValid, serverOnly, noUsage               Identity
	caItself, caLeaf, intermediate, rotated                 Identity

	// oldCA is the CA the test-only node accepts until the rotation case
	// removes it; rotated is an os:admin client of it.
	oldCA *ca.CA
}

// certSpec describes a certificate to sign outside the issuer's profiles,
// so that the cases can present what Aegis never issues.
type certSpec struct {
	cn        string
	orgs      []string
	eku       []x509.ExtKeyUsage
	isCA      bool
	notBefore time.Time
	life      time.Duration
}

// sign makes a certificate of spec for a new Ed25519 key, signed by parent
// (self-signed when parent is nil).
func sign(spec certSpec, parent *x509.Certificate, parentKey crypto.Signer) (*x509.Certificate, crypto.Signer, error) {
	key, err := ca.GenerateKey(ca.Ed25519, nil)
	if err != nil {
		return nil, nil, err
	}

	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, nil, err
	}

	if spec.notBefore.IsZero() {
		spec.notBefore = time.Now().Add(-time.Hour)
	}

	if spec.life == 0 {
		spec.life = 2 * time.Hour
	}

	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: spec.cn, Organization: spec.orgs},
		NotBefore:    spec.notBefore,
		NotAfter:     spec.notBefore.Add(spec.life),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  spec.eku,
	}

	if spec.isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	}

	if parent == nil {
		parent, parentKey = tmpl, key
	}

	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("signing %s: %w", spec.cn, err)
	}

	cert, err := x509.ParseCertificate(der)

	return cert, key, err
}

// leaf signs spec with parent and wraps it as an identity.
func leaf(name string, spec certSpec, parent *ca.CA) (Identity, error) {
	cert, key, err := sign(spec, parent.Cert, parent.Key)

	return Identity{Name: name, Chain: []*x509.Certificate{cert}, Key: key}, err
}

// issued asks the real issuer for a certificate of profile with roles,
// valid from start, so the certificate is exactly what Aegis issues.
func issued(name string, authority *ca.CA, profile ca.Profile, start time.Time, roles ...role.Role) (Identity, error) {
	iss, err := ca.NewIssuer(ca.IssuerConfig{CA: authority, Clock: fixedClock(start)})
	if err != nil {
		return Identity{}, err
	}

	key, err := ca.GenerateKey(ca.Ed25519, nil)
	if err != nil {
		return Identity{}, err
	}

	csrPEM, err := ca.NewCSR(key, name, nil)
	if err != nil {
		return Identity{}, err
	}

	csr, err := ca.ParseCSR(csrPEM)
	if err != nil {
		return Identity{}, err
	}

	ttl := time.Hour
	if profile != ca.ProfileClient {
		ttl = 0
	}

	out, err := iss.Issue(ca.Request{CSR: csr, Profile: profile, Roles: role.NewSet(roles...), TTL: ttl})
	if err != nil {
		return Identity{}, fmt.Errorf("issuing %s: %w", name, err)
	}

	return Identity{Name: name, Chain: []*x509.Certificate{out.Cert}, Key: key}, nil
}

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

// mint makes every identity of the cases from the cluster's OS CA.
func mint(osCA *ca.CA, admin Identity) (*identities, error) {
	ids := &identities{admin: admin}
	now := time.Now()
	clientAuth := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	adminOrg := []string{string(role.Admin)}

	other, err := ca.Generate(ca.Config{Organization: "elsewhere", CommonName: "another CA"})
	if err != nil {
		return nil, err
	}

	if ids.oldCA, err = ca.Generate(ca.Config{Organization: "aegis", CommonName: "rotated-out CA"}); err != nil {
		return nil, err
	}

	steps := []struct {
		dst  *Identity
		make func() (Identity, error)
	}{
		{&ids.operator, func() (Identity, error) { return issued("operator", osCA, ca.ProfileClient, now, role.Operator) }},
		{&ids.reader, func() (Identity, error) { return issued("reader", osCA, ca.ProfileClient, now, role.Reader) }},
		{&ids.etcdBackup, func() (Identity, error) { return issued("etcd-backup", osCA, ca.ProfileClient, now, role.EtcdBackup) }},
		{&ids.impersonator, func() (Identity, error) { return issued("impersonator", osCA, ca.ProfileImpersonator, now) }},
		{&ids.expired, func() (Identity, error) {
			return leaf("expired", certSpec{cn: "expired", orgs: adminOrg, eku: clientAuth, notBefore: now.Add(-3 * time.Hour), life: time.Hour}, osCA)
		}},
		{&ids.notYetValid, func() (Identity, error) {
			return leaf("not-yet-valid", certSpec{cn: "not-yet-valid", orgs: adminOrg, eku: clientAuth, notBefore: now.Add(2 * time.Hour)}, osCA)
		}},
		{&ids.otherCA, func() (Identity, error) { return issued("other-ca-reader", other, ca.ProfileClient, now, role.Reader) }},
		{&ids.forgedAdmin, func() (Identity, error) { return issued("forged-admin", other, ca.ProfileClient, now, role.Admin) }},
		{&ids.rotated, func() (Identity, error) { return issued("rotated-admin", ids.oldCA, ca.ProfileClient, now, role.Admin) }},
		{&ids.unknownRoles, func() (Identity, error) {
			return leaf("unknown-roles", certSpec{cn: "unknown-roles", orgs: []string{"os:root", "os:superuser"}, eku: clientAuth}, osCA)
		}},
		{&ids.noRoles, func() (Identity, error) { return leaf("no-roles", certSpec{cn: "no-roles", eku: clientAuth}, osCA) }},
		{&ids.serverOnly, func() (Identity, error) {
			return leaf("server-only", certSpec{cn: "server-only", orgs: adminOrg, eku: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, osCA)
		}},
		{&ids.noUsage, func() (Identity, error) { return leaf("no-usage", certSpec{cn: "no-usage", orgs: adminOrg}, osCA) }},
		{&ids.caLeaf, func() (Identity, error) {
			return leaf("ca-leaf", certSpec{cn: "ca-leaf", orgs: adminOrg, eku: clientAuth, isCA: true}, osCA)
		}},
		{&ids.selfSigned, func() (Identity, error) { return selfSigned(adminOrg, clientAuth) }},
		{&ids.intermediate, func() (Identity, error) { return throughIntermediate(osCA, adminOrg, clientAuth) }},
	}

	for _, s := range steps {
		if *s.dst, err = s.make(); err != nil {
			return nil, err
		}
	}

	ids.caItself = Identity{Name: "the OS CA", Chain: []*x509.Certificate{osCA.Cert}, Key: osCA.Key}

	return ids, nil
}

func selfSigned(orgs []string, eku []x509.ExtKeyUsage) (Identity, error) {
	cert, key, err := sign(certSpec{cn: "self-signed", orgs: orgs, eku: eku}, nil, nil)

	return Identity{Name: "self-signed", Chain: []*x509.Certificate{cert}, Key: key}, err
}

// throughIntermediate is an os:admin leaf signed by an intermediate CA
// that the OS CA signed, presented with the intermediate.
func throughIntermediate(osCA *ca.CA, orgs []string, eku []x509.ExtKeyUsage) (Identity, error) {
	inter, interKey, err := sign(certSpec{cn: "intermediate", isCA: true}, osCA.Cert, osCA.Key)
	if err != nil {
		return Identity{}, err
	}

	cert, key, err := sign(certSpec{cn: "behind-intermediate", orgs: orgs, eku: eku}, inter, interKey)

	return Identity{Name: "behind-intermediate", Chain: []*x509.Certificate{cert, inter}, Key: key}, err
}
