package bench

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/certs"
)

// issuanceWork says what each server does per certificate in these cases,
// so that the comparison can be judged: the same key types, TLS and
// signatures on both sides; trustd's checks and durable record on one.
const issuanceWork = "Both servers: TLS 1.3 with a server certificate of the CA's key type; " +
	"per certificate, parse the CSR and verify its signature, sign once, and verify the signature made (x509.CreateCertificate). " +
	"trustd also checks the token in constant time, the time gate, the names against policy and the control planes' names, " +
	"checks the fields of the result, and syncs its audit record to disk (fdatasync, one per group of concurrent issuances) before it answers. " +
	"cfssl serve checks the request's HMAC and neither logs (-loglevel 2) nor records the certificate (no certificate database)"

// issueSetup is what the issuance cases of one key type share: the CA (the
// OS CA of a fresh secrets bundle) and the CSR every case signs.
type issueSetup struct {
	kt     ca.KeyType
	dir    string
	bundle *certs.Bundle
	ca     *ca.CA
	csrPEM []byte
}

// issuance measures, per key type, the in-process bound, trustd and cfssl
// serve, interleaved.
func (r *run) issuance(ctx context.Context) error {
	kts := ca.KeyTypes()
	if len(kts) > min(len(TrustdIPs), len(CfsslIPs)) {
		return fmt.Errorf("bench: %d key types, addresses for %d", len(kts), min(len(TrustdIPs), len(CfsslIPs)))
	}

	for i, kt := range kts {
		is, err := r.issueKeyType(ctx, kt, TrustdIPs[i], CfsslIPs[i])
		if err != nil {
			return fmt.Errorf("%s: %w", kt, err)
		}

		r.res.Issuance = append(r.res.Issuance, is)
	}

	return nil
}

func (r *run) issueKeyType(ctx context.Context, kt ca.KeyType, trustdIP, cfsslIP string) (Issuance, error) {
	s, err := newIssueSetup(filepath.Join(r.dir, "issue-"+string(kt)), kt)
	if err != nil {
		return Issuance{}, err
	}

	r.logf("issuance, %s: starting trustd on %s and cfssl serve on %s", kt, trustdIP, cfsslIP)

	td, err := r.startTrustd(ctx, s, trustdIP)
	if err != nil {
		return Issuance{}, err
	}
	defer td.close() //nolint:errcheck // the server is also on the run's clean-up list, which reports

	cf, err := r.startCfssl(ctx, s, cfsslIP)
	if err != nil {
		return Issuance{}, err
	}
	defer cf.close() //nolint:errcheck // as above

	role := "stand-alone, issuance " + string(kt)
	watched := watchedProcesses{{"trustd", role, td.proc.PID()}, {"cfssl serve", role, cf.proc.PID()}}
	idle := watched.read()

	r.logf("issuance, %s: %d calls per case (%d with a new connection per call)", kt, r.plan.IssueCalls, r.plan.IssueNewConnCalls)

	lat, err := r.compareIssuers(ctx, s, td, cf)
	if err != nil {
		return Issuance{}, err
	}

	r.logf("issuance, %s: %d calls per server at %v callers", kt, r.plan.SaturatedCalls, SaturatedCallers)

	sat, err := r.saturate(ctx, td, cf)
	if err != nil {
		return Issuance{}, err
	}

	r.res.Memory = append(r.res.Memory, watched.memory(idle, watched.read())...)

	return Issuance{
		KeyType: string(kt), Bound: lat[0].Case(),
		TrustdOne: lat[1].Case(), TrustdNew: lat[2].Case(),
		CfsslOne: lat[3].Case(), CfsslNew: lat[4].Case(),
		Saturated: sat,
	}, nil
}

// compareIssuers runs the five cases of one key type, interleaved,
// charging the servers' and the harness's CPU time.
func (r *run) compareIssuers(ctx context.Context, s *issueSetup, td *trustdServer, cf *cfsslServer) ([]sample, error) {
	p, self := r.plan, os.Getpid()
	trustdMeters := [][]int{{td.proc.PID(), self}, {td.proc.PID()}}
	cfsslMeters := [][]int{{cf.proc.PID(), self}, {cf.proc.PID()}}

	return compare(ctx, p.Rounds, p.Budget,
		variant{"in-process bound", p.IssueCalls, boundCall(s.ca, s.csrPEM), [][]int{{self}}},
		variant{"trustd one connection", p.IssueCalls, td.callOne, trustdMeters},
		variant{"trustd new connection", p.IssueNewConnCalls, td.callNew, trustdMeters},
		variant{"cfssl one connection", p.IssueCalls, cf.callOne, cfsslMeters},
		variant{"cfssl new connection", p.IssueNewConnCalls, cf.callNew, cfsslMeters},
	)
}

func newIssueSetup(dir string, kt ca.KeyType) (*issueSetup, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}

	bundle, err := certs.GenerateBundle(certs.BundleOptions{OSKeyType: kt})
	if err != nil {
		return nil, err
	}

	authority, err := bundle.OSCA(time.Now())
	if err != nil {
		return nil, err
	}

	key, err := ca.GenerateKey(kt, nil)
	if err != nil {
		return nil, err
	}

	csrPEM, err := ca.NewCSR(key, IssueSource, []string{IssueSource})
	if err != nil {
		return nil, err
	}

	return &issueSetup{kt: kt, dir: dir, bundle: bundle, ca: authority, csrPEM: csrPEM}, nil
}

// boundCall is the least any issuer does: parse the CSR and check its
// signature, then sign a certificate for its key with a random serial.
// x509.CreateCertificate also checks the signature it made.
func boundCall(authority *ca.CA, csrPEM []byte) func(context.Context) error {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)

	return func(context.Context) error {
		block, _ := pem.Decode(csrPEM)
		if block == nil {
			return errors.New("no PEM block")
		}

		csr, err := x509.ParseCertificateRequest(block.Bytes)
		if err != nil {
			return err
		}

		if err = csr.CheckSignature(); err != nil {
			return err
		}

		serial, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return err
		}

		now := time.Now()
		tmpl := &x509.Certificate{
			SerialNumber: serial, Subject: pkix.Name{CommonName: csr.Subject.CommonName},
			NotBefore: now.Add(-time.Minute), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			BasicConstraintsValid: true, DNSNames: csr.DNSNames, IPAddresses: csr.IPAddresses,
		}

		_, err = x509.CreateCertificate(rand.Reader, tmpl, authority.Cert, csr.PublicKey, authority.Key)

		return err
	}
}
