package apid

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestStreamEndsWhenCertificateIsRevoked: a change of the list ends the
// open calls of a revoked certificate at once, without waiting for the
// periodic sweep, and leaves the others open.
func TestStreamEndsWhenCertificateIsRevoked(t *testing.T) {
	gt := newGuardTest(t)
	gt.g.interval = 24 * time.Hour // no periodic sweep: the change alone must do it

	revoked := &Revocations{}
	s := &Server{accepted: gt.accepted.Load, clock: gt.clk, revoked: revoked}
	gt.g.check = s.recheckClient
	s.streams = gt.g

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	go s.followRevocations(ctx)

	victim, other := gt.chain(t, time.Hour), gt.chain(t, time.Hour)

	vctx, vrelease, err := gt.g.admit(call(t, victim, 1, false), machine.MachineService_Events_FullMethodName, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer vrelease()

	octx, orelease, err := gt.g.admit(call(t, other, 2, false), machine.MachineService_Events_FullMethodName, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer orelease()

	if err := gt.clk.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}

	revoked.Set([]string{victim[0].SerialNumber.Text(16)})

	st := waitEnded(t, vctx)
	if status.Code(st) != codes.Unauthenticated || !strings.Contains(st.Error(), "revoked") ||
		!strings.Contains(st.Error(), victim[0].SerialNumber.Text(16)) {
		t.Fatalf("ended with %v, want Unauthenticated naming the revocation and the serial", st)
	}

	notEnded(t, octx)

	if err := s.recheckClient(victim); !errors.Is(err, errRevoked) {
		t.Fatalf("a call of the revoked certificate: %v, want errRevoked", err)
	}

	if err := s.recheckClient(other); err != nil {
		t.Fatalf("a call of another certificate: %v", err)
	}
}

func TestHandshakeRefusesRevokedCertificate(t *testing.T) {
	gt := newGuardTest(t)
	revoked := &Revocations{}
	s := &Server{accepted: gt.accepted.Load, clock: gt.clk, revoked: revoked}
	chain := gt.chain(t, time.Hour)
	cs := tls.ConnectionState{PeerCertificates: chain[:1], VerifiedChains: [][]*x509.Certificate{chain}}

	if err := s.verifyClientChain(cs); err != nil {
		t.Fatalf("before the revocation: %v", err)
	}

	revoked.Set([]string{chain[0].SerialNumber.Text(16)})

	err := s.verifyClientChain(cs)
	if !errors.Is(err, errRevoked) {
		t.Fatalf("after the revocation: %v, want errRevoked", err)
	}

	if kind := handshakeKind(err); kind != "revoked" {
		t.Errorf("refusal kind %q, want revoked", kind)
	}
}
