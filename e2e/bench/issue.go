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
	"cfssl serve checks the request's HMAC and does not log (-loglevel 2); without a certificate database it records nothing, " +
	"with one (-db-config, cfssl's sqlite schema) it inserts every certificate into sqlite, committed before it answers"

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
	if n := min(len(TrustdIPs), len(CfsslIPs), len(CfsslDBIPs)); len(kts) > n {
		return fmt.Errorf("bench: %d key types, addresses for %d", len(kts), n)
	}

	for i, kt := range kts {
		is, err := r.issueKeyType(ctx, kt, issueAddrs{TrustdIPs[i], CfsslIPs[i], CfsslDBIPs[i]})
		if err != nil {
			return fmt.Errorf("%s: %w", kt, err)
		}

		r.res.Issuance = append(r.res.Issuance, is)
	}

	return nil
}

// issueAddrs are the addresses of one key type's servers.
type issueAddrs struct{ trustd, cfssl, cfsslDB string }

// issuers are one key type's servers: trustd, and cfssl serve without and
// with a certificate database.
type issuers struct {
	td             *trustdServer
	cfssl, cfsslDB *cfsslServer
}

// startIssuers starts trustd and both cfssl servers; close stops those
// started, on failure too.
func (r *run) startIssuers(ctx context.Context, s *issueSetup, a issueAddrs) (is issuers, err error) {
	r.logf("issuance, %s: starting trustd on %s, cfssl serve on %s, cfssl serve with a certificate database on %s",
		s.kt, a.trustd, a.cfssl, a.cfsslDB)

	if is.td, err = r.startTrustd(ctx, s, a.trustd); err != nil {
		return is, err
	}

	if is.cfssl, err = r.startCfssl(ctx, s, a.cfssl, false); err != nil {
		return is, err
	}

	is.cfsslDB, err = r.startCfssl(ctx, s, a.cfsslDB, true)

	return is, err
}

// close stops the servers that were started; they are also on the run's
// clean-up list, which reports.
func (is issuers) close() {
	for _, c := range []*cfsslServer{is.cfssl, is.cfsslDB} {
		if c != nil {
			c.close() //nolint:errcheck // as above
		}
	}

	if is.td != nil {
		is.td.close() //nolint:errcheck // as above
	}
}

func (r *run) issueKeyType(ctx context.Context, kt ca.KeyType, a issueAddrs) (Issuance, error) {
	s, err := newIssueSetup(filepath.Join(r.dir, "issue-"+string(kt)), kt)
	if err != nil {
		return Issuance{}, err
	}

	is, err := r.startIssuers(ctx, s, a)
	defer is.close()

	if err != nil {
		return Issuance{}, err
	}

	role := "stand-alone, issuance " + string(kt)
	watched := watchedProcesses{{"trustd", role, is.td.proc.PID()}, {serverCfssl, role, is.cfssl.proc.PID()},
		{serverCfsslDB, role, is.cfsslDB.proc.PID()}}
	idle := watched.read()

	r.logf("issuance, %s: %d calls per case (%d with a new connection per call)", kt, r.plan.IssueCalls, r.plan.IssueNewConnCalls)

	lat, err := r.compareIssuers(ctx, s, is)
	if err != nil {
		return Issuance{}, err
	}

	r.logf("issuance, %s: %d calls per server at %v callers", kt, r.plan.SaturatedCalls, SaturatedCallers)

	sat, err := r.saturate(ctx, is)
	if err != nil {
		return Issuance{}, err
	}

	r.res.Memory = append(r.res.Memory, watched.memory(idle, watched.read())...)

	rows, answered, err := is.cfsslDB.checkRecorded(ctx)
	if err != nil {
		return Issuance{}, err
	}

	r.logf("issuance, %s: cfssl's certificate database holds %d certificates; %d answered", kt, rows, answered)

	return Issuance{
		KeyType: string(kt), Bound: lat[0].Case(),
		TrustdOne: lat[1].Case(), TrustdNew: lat[2].Case(),
		CfsslOne: lat[3].Case(), CfsslNew: lat[4].Case(),
		CfsslDBOne: lat[5].Case(), CfsslDBNew: lat[6].Case(),
		Saturated: sat,
	}, nil
}

// compareIssuers runs the seven cases of one key type, interleaved,
// charging the servers' and the harness's CPU time.
func (r *run) compareIssuers(ctx context.Context, s *issueSetup, is issuers) ([]sample, error) {
	p, self := r.plan, os.Getpid()
	meters := func(pid int) [][]int { return [][]int{{pid, self}, {pid}} }
	td, cf, db := meters(is.td.proc.PID()), meters(is.cfssl.proc.PID()), meters(is.cfsslDB.proc.PID())

	return compare(ctx, p.Rounds, p.Budget,
		variant{"in-process bound", p.IssueCalls, boundCall(s.ca, s.csrPEM), [][]int{{self}}},
		variant{"trustd one connection", p.IssueCalls, is.td.callOne, td},
		variant{"trustd new connection", p.IssueNewConnCalls, is.td.callNew, td},
		variant{"cfssl one connection", p.IssueCalls, is.cfssl.callOne, cf},
		variant{"cfssl new connection", p.IssueNewConnCalls, is.cfssl.callNew, cf},
		variant{"cfssl with database one connection", p.IssueCalls, is.cfsslDB.callOne, db},
		variant{"cfssl with database new connection", p.IssueNewConnCalls, is.cfsslDB.callNew, db},
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
