package ca

import (
	"crypto/x509"
	"fmt"
	"time"

	cfconfig "github.com/cloudflare/cfssl/config"

	"github.com/aegis-os/aegis/authz/role"
)

// Profile names a kind of certificate the issuer makes. A profile alone
// decides key usage, extended key usage, the CA flag, the Organization and
// the lifetime bounds; the request decides nothing of these.
type Profile string

// The issuer's profiles.
const (
	// ProfileServer is a TLS server certificate (EKU ServerAuth), no Organization.
	ProfileServer Profile = "server"
	// ProfileClient is a TLS client certificate (EKU ClientAuth only) whose
	// Organization holds the roles the issuer was asked for.
	ProfileClient Profile = "client"
	// ProfileImpersonator is a node's own client certificate, used by apid to
	// forward requests to other nodes: EKU ClientAuth, Organization os:impersonator.
	ProfileImpersonator Profile = "impersonator"
	// ProfilePeer is a certificate of etcd, whose members dial each other
	// with the certificate they serve with: EKU ServerAuth and ClientAuth,
	// no Organization. Only the etcd CA issues it; nothing that trusts the
	// OS CA accepts it.
	ProfilePeer Profile = "peer"
)

// Profiles lists every profile.
func Profiles() []Profile {
	return []Profile{ProfileServer, ProfileClient, ProfileImpersonator, ProfilePeer}
}

// ProfileDefaults gives each profile's lifetime when a request names none, and
// the longest lifetime an Issuer grants unless its config lowers it.
type ProfileDefaults struct {
	TTL    time.Duration
	MaxTTL time.Duration
}

// DefaultsFor returns the lifetime defaults of p: node certificates (server,
// impersonator) live 24 hours; client certificates one year, as Talos's admin
// certificates do.
func DefaultsFor(p Profile) ProfileDefaults {
	switch p {
	case ProfileClient:
		return ProfileDefaults{TTL: 365 * 24 * time.Hour, MaxTTL: 365 * 24 * time.Hour}
	default:
		return ProfileDefaults{TTL: 24 * time.Hour, MaxTTL: 365 * 24 * time.Hour}
	}
}

func (p Profile) known() bool {
	switch p {
	case ProfileServer, ProfileClient, ProfileImpersonator, ProfilePeer:
		return true
	default:
		return false
	}
}

func (p Profile) extKeyUsage() []x509.ExtKeyUsage {
	switch p {
	case ProfileServer:
		return []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	case ProfilePeer:
		return []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	default:
		return []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
}

// cfsslUsages names the profile's usages as cfssl does.
func (p Profile) cfsslUsages() []string {
	usages := []string{"digital signature"}

	for _, eku := range p.extKeyUsage() {
		if eku == x509.ExtKeyUsageServerAuth {
			usages = append(usages, "server auth")
		} else {
			usages = append(usages, "client auth")
		}
	}

	return usages
}

// organization decides the certificate's Organization from the profile and
// the roles the caller (never the CSR) asked for.
func (p Profile) organization(roles role.Set) ([]string, error) {
	switch p {
	case ProfileServer, ProfilePeer:
		if len(roles) > 0 {
			return nil, refuse(ReasonRoles, "server and peer certificates carry no roles")
		}

		return nil, nil
	case ProfileImpersonator:
		if len(roles) > 0 {
			return nil, refuse(ReasonRoles, "impersonator certificates carry only %s", role.Impersonator)
		}

		return []string{string(role.Impersonator)}, nil
	default:
		if len(roles) == 0 {
			return nil, refuse(ReasonRoles, "a client certificate needs at least one role")
		}

		if roles.Has(role.Impersonator) {
			return nil, refuse(ReasonRoles, "%s is granted only through the %s profile", role.Impersonator, ProfileImpersonator)
		}

		return roles.Strings(), nil
	}
}

// profilePolicy is what a profile puts in every certificate it signs.
type profilePolicy struct {
	keyUsage    x509.KeyUsage
	extKeyUsage []x509.ExtKeyUsage
}

// policyFromCfssl reads each profile's usages from the cfssl signing
// policy, once, when an issuer is built. A profile missing from it, or with
// a usage cfssl does not know, is a programming error caught here rather
// than a certificate without usages later.
func policyFromCfssl(signing *cfconfig.Signing) (map[Profile]profilePolicy, error) {
	out := make(map[Profile]profilePolicy, len(Profiles()))

	for _, p := range Profiles() {
		sp, ok := signing.Profiles[string(p)]
		if !ok {
			return nil, fmt.Errorf("ca: no signing profile %q", p)
		}

		ku, eku, unknown := sp.Usages()
		if ku == 0 || len(eku) == 0 || len(unknown) > 0 {
			return nil, fmt.Errorf("ca: signing profile %q: key usage %v, extended %v, unknown %q", p, ku, eku, unknown)
		}

		out[p] = profilePolicy{keyUsage: ku, extKeyUsage: eku}
	}

	return out, nil
}

// cfsslPolicy is the cfssl signing policy behind the profiles. Every profile
// copies only the public key and the DNS and IP SANs from the CSR; the
// subject comes from the issuer and serials from the issuer's Rand.
func cfsslPolicy() *cfconfig.Signing {
	whitelist := &cfconfig.CSRWhitelist{
		PublicKeyAlgorithm: true,
		PublicKey:          true,
		SignatureAlgorithm: true,
		DNSNames:           true,
		IPAddresses:        true,
	}

	profiles := map[string]*cfconfig.SigningProfile{}

	for _, p := range Profiles() {
		profiles[string(p)] = &cfconfig.SigningProfile{
			Usage:                       p.cfsslUsages(),
			Expiry:                      DefaultsFor(p).TTL,
			CSRWhitelist:                whitelist,
			ClientProvidesSerialNumbers: true,
		}
	}

	// cfssl falls back to the default profile for an unknown name. The
	// issuer checks names first; should one slip through, this default has
	// no usages, so cfssl refuses to sign with it.
	return &cfconfig.Signing{
		Profiles: profiles,
		Default:  &cfconfig.SigningProfile{Expiry: time.Nanosecond, CSRWhitelist: whitelist, ClientProvidesSerialNumbers: true},
	}
}
