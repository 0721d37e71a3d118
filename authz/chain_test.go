package authz_test

import (
	"context"
	"crypto/x509"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/authz"
	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/internal/logtest"
)

func TestCheckClientChain(t *testing.T) {
	p := newPKI(t)
	client := p.client(t, role.Reader)
	noUsage := p.client(t, role.Reader)
	noUsage.ExtKeyUsage = nil
	caLeaf := p.client(t, role.Admin)
	caLeaf.IsCA = true
	signer := p.client(t, role.Admin)
	signer.KeyUsage |= x509.KeyUsageCertSign

	tests := []struct {
		name  string
		chain []*x509.Certificate
		want  error
	}{
		{"leaf signed by the accepted CA", []*x509.Certificate{client, anchor}, nil},
		{"no chain", nil, authz.ErrUnauthenticated},
		{"the accepted CA alone", []*x509.Certificate{anchor}, authz.ErrCALeaf},
		{"CA:TRUE leaf", []*x509.Certificate{caLeaf, anchor}, authz.ErrCALeaf},
		{"leaf that may sign certificates", []*x509.Certificate{signer, anchor}, authz.ErrCALeaf},
		{"through an intermediate", []*x509.Certificate{client, {IsCA: true}, anchor}, authz.ErrNotDirect},
		{"leaf without extended key usage", []*x509.Certificate{noUsage, anchor}, authz.ErrNoClientAuth},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := authz.CheckClientChain(tt.chain)
			if !errors.Is(err, tt.want) || (tt.want != nil && !errors.Is(err, authz.ErrUnauthenticated)) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestRecheckRefusesCalls(t *testing.T) {
	var sink logtest.Sink

	p := newPKI(t)
	reader := p.client(t, role.Reader)
	revoked := errors.New("CA no longer accepted")

	var seen []*x509.Certificate

	a := authz.NewAuthenticator(authz.AuthenticatorConfig{Logger: sink.Logger(), Recheck: func(_ context.Context, chain []*x509.Certificate) error {
		seen = chain
		if chain[0] == reader {
			return revoked
		}

		return nil
	}})

	_, err := runUnary(peerCtx(reader, true, nil), methodVersion, nil, []grpc.UnaryServerInterceptor{a.UnaryServerInterceptor()})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("re-check refusal: %v, want Unauthenticated", err)
	}

	if len(seen) != 2 || seen[0] != reader || seen[1] != anchor {
		t.Fatalf("re-check saw chain %v, want the verified chain", seen)
	}

	if rec := sink.First(t, "call refused: no valid client certificate"); rec == nil || !strings.Contains(rec[logkey.Error].(string), revoked.Error()) {
		t.Fatalf("refusal not logged with its cause: %v", sink.Records(t))
	}

	if _, err = runUnary(peerCtx(p.client(t, role.Reader), true, nil), methodVersion, nil,
		[]grpc.UnaryServerInterceptor{a.UnaryServerInterceptor()}); err != nil {
		t.Fatalf("re-check passing: %v", err)
	}
}
