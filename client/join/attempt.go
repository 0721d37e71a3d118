package join

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/backoff"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/logkey"
)

// ErrRefused wraps a refusal no other endpoint would answer differently: the
// CSR itself broke trustd's rules (InvalidArgument) or named what no token
// may have (PermissionDenied). Join stops on it.
var ErrRefused = errors.New("join: request refused")

// ErrTokenRefused wraps trustd's refusal of the token (Unauthenticated):
// unknown, expired, used up or revoked. It does not heal by asking again,
// but an operator may create or extend the token meanwhile, so Join goes
// on asking, backing off to RefusedRetryMax, and logs the refusal plainly.
var ErrTokenRefused = errors.New("trustd refused the node's token: " +
	"create or extend it ('aegisctl token create'), or give the node a config with a valid one")

// tokenRefusal is trustd's refusal of the token by one endpoint: it is
// ErrTokenRefused, and keeps trustd's status for callers that ask for
// the code.
type tokenRefusal struct {
	endpoint string
	st       *status.Status
}

func (e *tokenRefusal) Error() string {
	return fmt.Sprintf("%v (%s: %s)", ErrTokenRefused, e.endpoint, e.st.Message())
}

func (e *tokenRefusal) Unwrap() error { return ErrTokenRefused }

// GRPCStatus is trustd's answer.
func (e *tokenRefusal) GRPCStatus() *status.Status { return e.st }

// MsgTokenRefused is the log message of a join whose token trustd
// refused; a local cluster shows it as the node's stage.
const MsgTokenRefused = "join refused"

// Join makes a new key and obtains a certificate for it. It tries the
// endpoints in turn until one signs, backing off between failures, and
// gives up when ctx ends, after MaxAttempts calls, or on ErrRefused.
func (c *Client) Join(ctx context.Context) (*Result, error) {
	key, err := ca.GenerateKey(c.keyType, nil)
	if err != nil {
		return nil, err
	}

	csrPEM, err := ca.NewCSR(key, c.cfg.Hostname, c.hosts)
	if err != nil {
		return nil, err
	}

	retry := backoff.Backoff{Min: c.cfg.RetryMin, Max: c.cfg.RetryMax, Rand: c.cfg.Rand}
	refused := backoff.Backoff{Min: c.cfg.RetryMin, Max: c.cfg.RefusedRetryMax, Rand: c.cfg.Rand}

	for attempt := 1; ; attempt++ {
		endpoint := c.nextEndpoint()

		res, err := c.attempt(ctx, endpoint, key, csrPEM)
		if err == nil {
			return res, nil
		}

		if errors.Is(err, ErrRefused) {
			return nil, err
		}

		if c.cfg.MaxAttempts > 0 && attempt >= c.cfg.MaxAttempts {
			return nil, fmt.Errorf("join: %d attempts failed, last: %w", attempt, err)
		}

		if errors.Is(err, ErrTokenRefused) {
			wait := refused.Next()
			c.cfg.Logger.Error(MsgTokenRefused,
				slog.String(logkey.Endpoint, endpoint), slog.Int(logkey.Attempt, attempt),
				slog.Duration(logkey.RetryIn, wait), slog.String(logkey.Error, err.Error()))

			if serr := c.sleep(ctx, wait); serr != nil {
				return nil, fmt.Errorf("join: giving up: %w (last attempt: %w)", serr, err)
			}

			continue
		}

		wait := retry.Next()
		c.cfg.Logger.Warn("join attempt failed",
			slog.String(logkey.Endpoint, endpoint), slog.Int(logkey.Attempt, attempt),
			slog.Duration(logkey.RetryIn, wait), slog.String(logkey.Error, err.Error()))

		if serr := c.sleep(ctx, wait); serr != nil {
			return nil, fmt.Errorf("join: giving up: %w (last attempt: %w)", serr, err)
		}
	}
}

func (c *Client) nextEndpoint() string {
	c.mu.Lock()
	defer c.mu.Unlock()

	ep := c.endpoints[c.next%len(c.endpoints)]
	c.next++

	return ep
}

// attempt makes one call and checks what came back.
func (c *Client) attempt(ctx context.Context, endpoint string, key crypto.Signer, csrPEM []byte) (*Result, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	defer cancel()

	caPEM, crtPEM, err := c.cfg.Transport.Certificate(ctx, endpoint, c.cfg.Token, csrPEM)
	if err != nil {
		switch status.Code(err) {
		case codes.InvalidArgument, codes.PermissionDenied:
			return nil, fmt.Errorf("%w by %s: %w", ErrRefused, endpoint, err)
		case codes.Unauthenticated:
			return nil, &tokenRefusal{endpoint: endpoint, st: status.Convert(err)}
		}

		return nil, fmt.Errorf("join: %s: %w", endpoint, err)
	}

	res, err := c.check(key, caPEM, crtPEM)
	if err != nil {
		return nil, fmt.Errorf("join: %s answered: %w", endpoint, err)
	}

	res.Endpoint = endpoint

	return res, nil
}

// check verifies that the certificate is for our key, is a server
// certificate, and chains to the CAs sent with it.
func (c *Client) check(key crypto.Signer, caPEM, crtPEM []byte) (*Result, error) {
	cert, err := ca.ParseCertificate(crtPEM)
	if err != nil {
		return nil, err
	}

	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, errors.New("certificate is not for the node's key")
	}

	cas, err := ca.ParseAcceptedSet(caPEM, c.cfg.Clock.Now())
	if err != nil {
		return nil, fmt.Errorf("CA bundle: %w", err)
	}

	if err = cas.Verify(cert, x509.ExtKeyUsageServerAuth, c.cfg.Clock.Now()); err != nil {
		return nil, fmt.Errorf("certificate does not verify: %w", err)
	}

	// The CAs the reply names are no authority of their own: the
	// certificate must also chain to a CA the node already trusts, or an
	// endpoint signing with a CA of its choosing would be believed.
	if err = c.cfg.CAs.Verify(cert, x509.ExtKeyUsageServerAuth, c.cfg.Clock.Now()); err != nil {
		return nil, fmt.Errorf("certificate does not chain to a CA the node trusts: %w", err)
	}

	keyPEM, err := ca.EncodeKey(key)
	if err != nil {
		return nil, err
	}

	return &Result{
		Certificate: cert, CertPEM: bytes.Clone(crtPEM), Key: key, KeyPEM: keyPEM,
		CAPEM: bytes.Clone(caPEM), CAs: cas,
	}, nil
}

func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	if !clock.Sleep(ctx, c.cfg.Clock, d) {
		return ctx.Err()
	}

	return nil
}
