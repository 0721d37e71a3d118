// Package tokenauth is trustd's token authenticator: the machine config's
// static token, which always works and has no limits (as in Talos), the
// previous static tokens a rotation still accepts until each one's expiry,
// and the tokens of a tokenstore.Store, with their expiry, use limit and
// allowed SANs.
package tokenauth

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/sanpolicy"
	"github.com/aegis-os/aegis/token"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/tokenstore"
)

// Config configures an Authenticator. At least one of Static and Store is
// required.
type Config struct {
	// Static is the machine config's token. Zero means none.
	Static token.Token
	// StaticSANs is what the static token obtains besides the caller's own
	// address (the config's cluster.workerSANs). Nil means nothing more.
	StaticSANs *sanpolicy.Policy
	// Previous are former static tokens, accepted like Static (with
	// StaticSANs) until each one's expiry. Nil means none.
	Previous []Previous
	// Store holds the other tokens. Nil means only the static token works.
	Store tokenstore.Store
	// Clock decides expiry. Nil means the system clock.
	Clock clock.Clock
	// Rand draws the decoy record's salt. Nil means crypto/rand.
	Rand io.Reader
}

// Authenticator implements trustd.Authenticator.
type Authenticator struct {
	// static is the static token with what it obtains; SetStatic replaces
	// it while calls are authenticated.
	static atomic.Pointer[staticToken]
	store  tokenstore.Store
	// kept is store when it keeps the last record it saw; nil otherwise.
	kept  tokenstore.Recaller
	clock clock.Clock
	// decoy stands in for an unknown id, so that an unknown id costs the
	// same hashing and comparison as a known one with a wrong secret.
	decoy tokenstore.Record
}

var _ trustd.Authenticator = (*Authenticator)(nil)

// SetStatic replaces the static token, what it obtains and the previous
// tokens still accepted, as a machine config applied without a reboot
// changes them: the next call is checked against the new tokens, and a
// token no longer listed is refused from then on. A zero token is ignored
// when there is no store, which would leave no token at all.
func (a *Authenticator) SetStatic(tok token.Token, sans *sanpolicy.Policy, previous []Previous) {
	if tok.IsZero() && a.store == nil {
		return
	}

	a.static.Store(newStaticToken(tok, sans, previous))
}

// New builds an authenticator.
func New(cfg Config) (*Authenticator, error) {
	if cfg.Static.IsZero() && cfg.Store == nil {
		return nil, errors.New("tokenauth: neither a static token nor a store")
	}

	cfg.Clock = defaults.Clock(cfg.Clock)
	cfg.Rand = defaults.Rand(cfg.Rand)

	a := &Authenticator{store: cfg.Store, clock: cfg.Clock}
	a.static.Store(newStaticToken(cfg.Static, cfg.StaticSANs, cfg.Previous))
	a.kept, _ = cfg.Store.(tokenstore.Recaller)

	// The decoy's secret is random and thrown away: nothing matches it.
	decoy, err := token.Generate(cfg.Rand)
	if err != nil {
		return nil, err
	}

	if err = a.decoy.SetSecret(cfg.Rand, decoy.Secret()); err != nil {
		return nil, err
	}

	return a, nil
}

// Authenticate checks tok against the static token and the store. Both
// checks always run and both compare in constant time, so neither the
// answer nor its timing tells an unknown id from a wrong secret.
//
// A store that keeps the last record it saw (tokenstore.Recaller, the
// shared etcd store) is asked for it first: a token it accepts needs no
// round through the store here, since Consume counts the use in one atomic
// step that judges the record as it is then. A refusal, which may be of a
// stale record, is checked against the record as it is now.
func (a *Authenticator) Authenticate(ctx context.Context, tok token.Token) (trustd.Grant, error) {
	static := a.static.Load()
	match := static.match(tok, a.clock.Now())
	isStatic := match.accepted()

	if a.kept != nil {
		rec, ok := a.kept.Recall(tok.ID())
		if !ok {
			rec = a.decoy // the same hashing whether the id is kept or not
		}

		if g, err := a.judge(rec, ok, tok); err == nil && !isStatic {
			return g, nil
		}
	}

	rec, known, err := a.lookup(ctx, tok.ID())

	switch {
	case err != nil && isStatic:
		// The machine config's tokens need no store: they keep working
		// while a shared store is unavailable.
		return static.grant(tok, match), nil
	case err != nil && match == matchExpired:
		return trustd.Grant{}, errOverlapEnded
	case err != nil:
		return trustd.Grant{}, err
	}

	g, err := a.judge(rec, known, tok)

	switch {
	case isStatic:
		return static.grant(tok, match), nil
	case err != nil && match == matchExpired:
		return trustd.Grant{}, errOverlapEnded
	}

	return g, err
}

// errOverlapEnded refuses a previous static token past its expiry.
var errOverlapEnded = fmt.Errorf("%w: a previous static token whose overlap has ended", trustd.ErrInvalidToken)

// judge checks tok's secret against rec (the decoy when the id is not
// known), then that the token is usable and what it allows. The secret is
// hashed whatever known says.
func (a *Authenticator) judge(rec tokenstore.Record, known bool, tok token.Token) (trustd.Grant, error) {
	if secretOK := rec.MatchesSecret(tok.Secret()); !known || !secretOK {
		return trustd.Grant{}, fmt.Errorf("%w: unknown id or wrong secret", trustd.ErrInvalidToken)
	}

	if err := rec.Usable(a.clock.Now()); err != nil {
		return trustd.Grant{}, fmt.Errorf("%w: %w", trustd.ErrInvalidToken, err)
	}

	policy, err := sanpolicy.Parse(rec.AllowedSANs)
	if err != nil {
		// The token service checked the patterns when it stored them.
		return trustd.Grant{}, fmt.Errorf("tokenauth: stored token %s: %w", rec.ID, err)
	}

	return trustd.Grant{TokenID: rec.ID, AllowedSANs: policy, Basis: rec}, nil
}

// lookup returns the stored record for id, or the decoy and false.
func (a *Authenticator) lookup(ctx context.Context, id string) (tokenstore.Record, bool, error) {
	if a.store == nil {
		return a.decoy, false, nil
	}

	rec, err := a.store.Get(ctx, id)

	switch {
	case errors.Is(err, tokenstore.ErrNotFound):
		return a.decoy, false, nil
	case errors.Is(err, tokenstore.ErrUnavailable):
		return tokenstore.Record{}, false, fmt.Errorf("%w: %w", trustd.ErrStoreUnavailable, err)
	case err != nil:
		return tokenstore.Record{}, false, fmt.Errorf("tokenauth: looking up token %s: %w", id, err)
	}

	return rec, true, nil
}

// Consume counts one use of a stored token; the static token has no limit.
// The store re-checks expiry, revocation and the use limit in the same
// atomic step, so a token used up or revoked since Authenticate is refused.
func (a *Authenticator) Consume(ctx context.Context, g trustd.Grant) error {
	if g.Static {
		return nil
	}

	if a.store == nil {
		return fmt.Errorf("%w: no token store", trustd.ErrInvalidToken)
	}

	err := a.use(ctx, g)

	switch {
	case err == nil:
		return nil
	case errors.Is(err, trustd.ErrInvalidToken):
		return err
	case errors.Is(err, tokenstore.ErrUsedUp), errors.Is(err, tokenstore.ErrExpired),
		errors.Is(err, tokenstore.ErrRevoked), errors.Is(err, tokenstore.ErrNotFound):
		return fmt.Errorf("%w: %w", trustd.ErrInvalidToken, err)
	case errors.Is(err, tokenstore.ErrUnavailable):
		return fmt.Errorf("%w: %w", trustd.ErrStoreUnavailable, err)
	default:
		return fmt.Errorf("tokenauth: counting a use of token %s: %w", g.TokenID, err)
	}
}

// use counts the use. With a store that keeps records, the atomic step also
// checks that the record is still of the token authenticated: the same
// secret hash, life and allowed SANs. A token deleted and made again under
// the same id in between, which Authenticate may not have seen, is refused
// rather than charged a use by a caller who never showed its secret.
func (a *Authenticator) use(ctx context.Context, g trustd.Grant) error {
	basis, ok := g.Basis.(tokenstore.Record)
	if a.kept == nil || !ok {
		_, err := a.store.Use(ctx, g.TokenID, a.clock.Now())

		return err
	}

	_, err := a.kept.UseIf(ctx, g.TokenID, a.clock.Now(), func(now tokenstore.Record) error {
		if !sameToken(basis, now) {
			return fmt.Errorf("%w: token %s was replaced since it was authenticated", trustd.ErrInvalidToken, g.TokenID)
		}

		return nil
	})

	return err
}

// sameToken reports whether a and b are records of one token: what a use
// or a revocation changes (uses, revocation time) may differ.
func sameToken(a, b tokenstore.Record) bool {
	return subtle.ConstantTimeCompare(a.SecretHash, b.SecretHash) == 1 && bytes.Equal(a.Salt, b.Salt) &&
		a.Created.Equal(b.Created) && a.Expires.Equal(b.Expires) && a.MaxUses == b.MaxUses &&
		slices.Equal(a.AllowedSANs, b.AllowedSANs)
}
