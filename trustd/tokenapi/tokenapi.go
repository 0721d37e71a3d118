// Package tokenapi implements the TokenService of api/tokens over a
// tokenstore.Store: Create returns a new token's secret, the only time it is
// shown; List shows every token without secrets; Revoke makes a token
// unusable at once and keeps it listed. The service is admin-only; the
// authorization layer in front of it enforces that.
package tokenapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aegis-os/aegis/api/tokens"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/sanpolicy"
	"github.com/aegis-os/aegis/token"
	"github.com/aegis-os/aegis/trustd/tokenstore"
)

// Config configures a Service. Store is required; the rest may be zero.
type Config struct {
	Store tokenstore.Store
	// DefaultTTL, MaxTTL and Retention default to the constants of limits.go.
	DefaultTTL time.Duration
	MaxTTL     time.Duration
	Retention  time.Duration
	// Clock stamps creation and revocation. Nil means the system clock.
	Clock clock.Clock
	// Rand draws tokens and salts. Nil means crypto/rand.
	Rand io.Reader
	// Logger receives a record of every token created or revoked (never a
	// secret) and store failures. Nil discards.
	Logger *slog.Logger
}

// Service implements tokens.TokenServiceServer.
type Service struct {
	tokens.UnimplementedTokenServiceServer

	cfg Config
}

// New builds a service over cfg.Store.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("tokenapi: no token store")
	}

	if cfg.MaxTTL <= 0 {
		cfg.MaxTTL = MaxTTL
	}

	if cfg.DefaultTTL <= 0 {
		cfg.DefaultTTL = min(DefaultTTL, cfg.MaxTTL)
	}

	if cfg.DefaultTTL > cfg.MaxTTL {
		return nil, fmt.Errorf("tokenapi: default TTL %s above max %s", cfg.DefaultTTL, cfg.MaxTTL)
	}

	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}

	cfg.Clock = defaults.Clock(cfg.Clock)
	cfg.Rand = defaults.Rand(cfg.Rand)
	cfg.Logger = defaults.Logger(cfg.Logger)

	return &Service{cfg: cfg}, nil
}

// Create makes a token and returns it whole, the only time its secret is
// shown: the store keeps only a hash.
func (s *Service) Create(ctx context.Context, req *tokens.CreateRequest) (*tokens.CreateResponse, error) {
	now := s.cfg.Clock.Now()

	rec, err := s.newRecord(req, now)
	if err != nil {
		return nil, s.toStatus(requestError{err})
	}

	// Pruning keeps ended tokens from filling the store; it failing must
	// not stop a new token, so it is only logged.
	if _, err = s.cfg.Store.Prune(ctx, now.Add(-s.cfg.Retention)); err != nil {
		s.cfg.Logger.Warn("pruning ended tokens failed", slog.String(logkey.Error, err.Error()))
	}

	tok, rec, err := s.store(ctx, rec)
	if err != nil {
		return nil, s.toStatus(err)
	}

	s.cfg.Logger.Info("token created",
		slog.String(logkey.TokenID, rec.ID), slog.Time(logkey.Expires, rec.Expires),
		slog.Any(logkey.MaxUses, rec.MaxUses), slog.Any(logkey.AllowedSANs, rec.AllowedSANs))

	return &tokens.CreateResponse{Messages: []*tokens.Created{{Token: tok.Reveal(), Info: toProto(rec)}}}, nil
}

// newRecord checks the request and builds the record it asks for, without
// an id or secret yet.
func (s *Service) newRecord(unsafe *tokens.CreateRequest, now time.Time) (tokenstore.Record, error) {
	ttl := s.cfg.DefaultTTL

	if d := unsafe.GetTtl(); d != nil {
		if err := d.CheckValid(); err != nil {
			return tokenstore.Record{}, fmt.Errorf("tokenapi: ttl: %w", err)
		}

		if d.AsDuration() != 0 {
			ttl = d.AsDuration()
		}
	}

	if ttl < MinTTL || ttl > s.cfg.MaxTTL {
		return tokenstore.Record{}, fmt.Errorf("tokenapi: ttl %s outside [%s, %s]", ttl, MinTTL, s.cfg.MaxTTL)
	}

	policy, err := sanpolicy.Parse(unsafe.GetAllowedSans())
	if err != nil {
		return tokenstore.Record{}, err
	}

	if err = checkDescription(unsafe.GetDescription()); err != nil {
		return tokenstore.Record{}, err
	}

	return tokenstore.Record{
		Created:     now,
		Expires:     now.Add(ttl),
		MaxUses:     unsafe.GetMaxUses(),
		AllowedSANs: policy.Strings(),
		Description: unsafe.GetDescription(),
	}, nil
}

func checkDescription(d string) error {
	if len(d) > tokenstore.MaxDescriptionLength {
		return fmt.Errorf("tokenapi: description of %d bytes, limit %d", len(d), tokenstore.MaxDescriptionLength)
	}

	if !utf8.ValidString(d) {
		return errors.New("tokenapi: description is not UTF-8")
	}

	for _, r := range d {
		if unicode.IsControl(r) {
			return fmt.Errorf("tokenapi: description holds control character %U", r)
		}
	}

	return nil
}

// store draws a token for rec and stores it, drawing again if the id is
// taken.
func (s *Service) store(ctx context.Context, rec tokenstore.Record) (token.Token, tokenstore.Record, error) {
	for range createAttempts {
		tok, err := token.Generate(s.cfg.Rand)
		if err != nil {
			return token.Token{}, rec, err
		}

		rec.ID = tok.ID()
		if err = rec.SetSecret(s.cfg.Rand, tok.Secret()); err != nil {
			return token.Token{}, rec, err
		}

		err = s.cfg.Store.Create(ctx, rec)
		if errors.Is(err, tokenstore.ErrExists) {
			continue
		}

		return tok, rec, err
	}

	return token.Token{}, rec, fmt.Errorf("tokenapi: %d token ids in a row were taken", createAttempts)
}

// List shows every token, expired and revoked ones included.
func (s *Service) List(ctx context.Context, _ *tokens.ListRequest) (*tokens.ListResponse, error) {
	recs, err := s.cfg.Store.List(ctx)
	if err != nil {
		return nil, s.toStatus(err)
	}

	list := &tokens.TokenList{Tokens: make([]*tokens.Token, 0, len(recs))}
	for _, r := range recs {
		list.Tokens = append(list.Tokens, toProto(r))
	}

	return &tokens.ListResponse{Messages: []*tokens.TokenList{list}}, nil
}

// Revoke makes a token unusable at once. Revoking a revoked token keeps its
// first revocation time and succeeds.
func (s *Service) Revoke(ctx context.Context, req *tokens.RevokeRequest) (*tokens.RevokeResponse, error) {
	id := req.GetId()
	if !token.ValidID(id) {
		return nil, s.toStatus(errBadID)
	}

	rec, err := s.cfg.Store.Revoke(ctx, id, s.cfg.Clock.Now())
	if err != nil {
		return nil, s.toStatus(err)
	}

	s.cfg.Logger.Info("token revoked", slog.String(logkey.TokenID, id))

	return &tokens.RevokeResponse{Messages: []*tokens.Revoked{{Info: toProto(rec)}}}, nil
}

// toProto describes a record without its secret: the message has no field
// that could carry one.
func toProto(r tokenstore.Record) *tokens.Token {
	t := &tokens.Token{
		Id:          r.ID,
		Created:     timestamppb.New(r.Created),
		Expires:     timestamppb.New(r.Expires),
		MaxUses:     r.MaxUses,
		Uses:        r.Uses,
		AllowedSans: append([]string(nil), r.AllowedSANs...),
		Description: r.Description,
	}

	if !r.Revoked.IsZero() {
		t.Revoked = timestamppb.New(r.Revoked)
	}

	return t
}
