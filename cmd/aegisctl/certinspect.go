package main

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
)

// pemDoc is one PEM block of 'certificate inspect'. PublicKeyFingerprint is
// the SHA-256 of the public key's SubjectPublicKeyInfo, the same for a key,
// its CSR and its certificate: it tells which files belong together.
type pemDoc struct {
	Kind                 string     `json:"kind"`
	Subject              string     `json:"subject,omitempty"`
	Issuer               string     `json:"issuer,omitempty"`
	SANs                 []string   `json:"sans,omitempty"`
	Roles                []string   `json:"roles,omitempty"`
	IsCA                 bool       `json:"isCA,omitempty"`
	NotBefore            *time.Time `json:"notBefore,omitempty"`
	NotAfter             *time.Time `json:"notAfter,omitempty"`
	Expired              bool       `json:"expired,omitempty"`
	Key                  string     `json:"key"`
	Fingerprint          string     `json:"fingerprint,omitempty"`
	PublicKeyFingerprint string     `json:"publicKeyFingerprint"`
}

func newCertificateCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certificate",
		Short: "Inspect PEM files and get node certificates from trustd",
	}

	cmd.AddCommand(newCertificateInspectCommand(e), newCertificateRequestCommand(e))

	return cmd
}

func newCertificateInspectCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Show what a PEM file holds: certificates, CSRs, private keys",
		Long: `Show each PEM block of FILE: a certificate's subject, SANs, issuer, validity,
key type, roles (its Organization, as apid reads them) and SHA-256
fingerprint; a CSR's subject, SANs and key; a private key's type. Every
block shows the fingerprint of its public key, which is the same for a key,
its CSR and its certificate. A private key is never printed.`,
		Example: `  aegisctl certificate inspect admin.crt
  aegisctl certificate inspect node-1.csr -o json
  aegisctl certificate inspect admin.key        # key type and public key fingerprint only`,
		Args: cobra.ExactArgs(1),
	}

	format := addDocumentFlag(cmd)

	cmd.RunE = func(_ *cobra.Command, args []string) error {
		data, err := os.ReadFile(args[0])
		if err != nil {
			return err
		}

		docs, err := inspectPEM(data, e.clock.Now())
		if err != nil {
			return fmt.Errorf("%s: %w", args[0], err)
		}

		if *format != formatTable {
			return writeDocument(e.stdout, *format, docs)
		}

		return pemTable(e.stdout, docs)
	}

	return cmd
}

// inspectPEM describes every PEM block of data.
func inspectPEM(data []byte, now time.Time) ([]pemDoc, error) {
	var docs []pemDoc

	for {
		var block *pem.Block
		if block, data = pem.Decode(data); block == nil {
			break
		}

		d, err := inspectBlock(block, now)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d (%s): %w", len(docs)+1, block.Type, err)
		}

		docs = append(docs, d)
	}

	if len(docs) == 0 {
		return nil, errors.New("no PEM block found: the file holds no certificate, CSR or key in PEM form")
	}

	return docs, nil
}

func inspectBlock(block *pem.Block, now time.Time) (pemDoc, error) {
	switch {
	case block.Type == "CERTIFICATE":
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return pemDoc{}, err
		}

		return certPEMDoc(cert, now), nil
	case block.Type == "CERTIFICATE REQUEST" || block.Type == "NEW CERTIFICATE REQUEST":
		csr, err := x509.ParseCertificateRequest(block.Bytes)
		if err != nil {
			return pemDoc{}, err
		}

		d := pemDoc{Kind: "certificate request", Subject: csr.Subject.String(), Key: ca.DescribeKey(csr.PublicKey),
			SANs: sansOf(csr.DNSNames, csr.IPAddresses, csr.EmailAddresses, len(csr.URIs))}
		d.PublicKeyFingerprint = publicKeyFingerprint(csr.PublicKey)

		return d, nil
	case strings.HasSuffix(block.Type, "PRIVATE KEY"):
		pub, err := publicKeyOf(block)
		if err != nil {
			return pemDoc{}, err
		}

		return pemDoc{Kind: "private key", Key: ca.DescribeKey(pub), PublicKeyFingerprint: publicKeyFingerprint(pub)}, nil
	default:
		return pemDoc{}, fmt.Errorf("unknown PEM type %q: expected CERTIFICATE, CERTIFICATE REQUEST or PRIVATE KEY", block.Type)
	}
}

func certPEMDoc(cert *x509.Certificate, now time.Time) pemDoc {
	notBefore, notAfter := cert.NotBefore.UTC(), cert.NotAfter.UTC()
	d := pemDoc{
		Kind: "certificate", Subject: subjectOf(cert), Issuer: cert.Issuer.String(), IsCA: cert.IsCA,
		SANs:      sansOf(cert.DNSNames, cert.IPAddresses, cert.EmailAddresses, len(cert.URIs)),
		NotBefore: &notBefore, NotAfter: &notAfter, Expired: !now.Before(cert.NotAfter),
		Key: ca.DescribeKey(cert.PublicKey), Fingerprint: ca.Fingerprint(cert),
		PublicKeyFingerprint: publicKeyFingerprint(cert.PublicKey),
	}

	if !cert.IsCA {
		roles, _ := role.FromOrganization(cert.Subject.Organization)
		d.Roles = roles.Strings()
	}

	return d
}

// publicKeyOf parses a private key block (PKCS #8, SEC 1 or PKCS #1) and
// returns its public key.
func publicKeyOf(block *pem.Block) (crypto.PublicKey, error) {
	var (
		key any
		err error
	)

	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}

	if err != nil {
		return nil, err
	}

	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported private key %T", key)
	}

	return signer.Public(), nil
}

// publicKeyFingerprint is the SHA-256 of the key's SubjectPublicKeyInfo.
func publicKeyFingerprint(pub crypto.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return ""
	}

	sum := sha256.Sum256(der)

	return "sha256:" + hex.EncodeToString(sum[:])
}

// pemTable prints each block as a list of fields.
func pemTable(w io.Writer, docs []pemDoc) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)

	for i, d := range docs {
		if i > 0 {
			fmt.Fprintln(tw)
		}

		row := func(name, value string) {
			if value != "" {
				fmt.Fprintf(tw, "%s:\t%s\n", name, value)
			}
		}

		row("Kind", d.Kind+map[bool]string{true: " (CA)"}[d.IsCA])
		row("Subject", d.Subject)
		row("Issuer", d.Issuer)
		row("SANs", strings.Join(d.SANs, ", "))
		row("Roles", strings.Join(d.Roles, ", "))

		if d.NotAfter != nil {
			row("Valid", d.NotBefore.Format(time.RFC3339)+" to "+d.NotAfter.Format(time.RFC3339)+
				map[bool]string{true: " (expired)"}[d.Expired])
		}

		row("Key", d.Key)
		row("Fingerprint", d.Fingerprint)
		row("Public key", d.PublicKeyFingerprint)
	}

	return tw.Flush()
}

// sansOf lists DNS names, IP addresses and e-mail addresses; URIs are only
// counted, as Aegis never grants them.
func sansOf(dns []string, ips []net.IP, emails []string, uris int) []string {
	out := slices.Clone(dns)

	for _, ip := range ips {
		out = append(out, ip.String())
	}

	out = append(out, emails...)

	if uris > 0 {
		out = append(out, fmt.Sprintf("(%d URIs)", uris))
	}

	return out
}
