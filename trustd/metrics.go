package trustd

import (
	"crypto/tls"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-os/aegis/internal/metrics"
)

// Reasons of refusals, as the metrics label them: one per refusal error
// of errors.go, so the set stays bounded whatever a caller sends.
const (
	reasonInvalidToken     = "invalid_token"
	reasonTimeNotSynced    = "time_not_synced"
	reasonBadRequest       = "bad_request"
	reasonReservedName     = "reserved_name"
	reasonNameHeld         = "name_held"
	reasonNamesUnavailable = "names_unavailable"
	reasonStoreUnavailable = "store_unavailable"
	reasonRateLimited      = "rate_limited"
	reasonOther            = "other"
)

// refusalReason is the metrics label of a refusal: the errors of toStatus,
// and "other" for the rest (internal errors, and calls gRPC refused before
// the handler: too large, undecodable, cancelled).
func refusalReason(err error) string {
	for _, r := range []struct {
		err    error
		reason string
	}{
		{ErrInvalidToken, reasonInvalidToken},
		{ErrTimeNotSynced, reasonTimeNotSynced},
		{ErrBadRequest, reasonBadRequest},
		{ErrReservedName, reasonReservedName},
		{ErrNameHeld, reasonNameHeld},
		{ErrNamesUnavailable, reasonNamesUnavailable},
		{ErrStoreUnavailable, reasonStoreUnavailable},
		{ErrRateLimited, reasonRateLimited},
	} {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}

	return reasonOther
}

// tokenKindNone is the token kind of a decision taken before the token
// was authenticated (an invalid token, a malformed call).
const tokenKindNone = "none"

// decisions counts what trustd decided; they are counted whether or not
// anything is registered to read them. byKind counts them again by token
// kind and outcome; issued and refused stay for the dashboards that read
// them.
type decisions struct {
	issued  prometheus.Counter
	refused *prometheus.CounterVec
	byKind  *prometheus.CounterVec
}

func newDecisions() decisions {
	return decisions{
		issued: prometheus.NewCounter(prometheus.CounterOpts{Name: metrics.TrustdIssued, Help: "Certificates trustd signed."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metrics.TrustdRefused, Help: "Certificate calls trustd refused, by reason.",
		}, []string{metrics.LabelReason}),
		byKind: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metrics.TrustdDecisions,
			Help: "Certificate calls trustd decided, by token kind (static, static-previous, stored, none) and outcome (issued, or the refusal's reason).",
		}, []string{metrics.LabelTokenKind, metrics.LabelOutcome}),
	}
}

// count counts a decision: err nil for an issuance, else the refusal;
// kind is the token's (tokenKind), empty before it was authenticated.
func (d decisions) count(err error, kind string) {
	if kind == "" {
		kind = tokenKindNone
	}

	if err == nil {
		d.issued.Inc()
		d.byKind.WithLabelValues(kind, metrics.OutcomeIssued).Inc()

		return
	}

	reason := refusalReason(err)
	d.refused.WithLabelValues(reason).Inc()
	d.byKind.WithLabelValues(kind, reason).Inc()
}

// registerMetrics puts trustd's collectors in reg (nothing for a nil reg):
// the decisions, the time gate, the connections against their caps, and
// the server certificate and accepted CAs.
func (s *Server) registerMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}

	// Every reason exists from the start, so a rate of refusals works
	// before the first one.
	for _, r := range []string{reasonInvalidToken, reasonTimeNotSynced, reasonBadRequest, reasonReservedName,
		reasonStoreUnavailable, reasonRateLimited, reasonOther} {
		s.decisions.refused.WithLabelValues(r)
	}

	for _, k := range []string{TokenKindStatic, TokenKindStaticPrevious, TokenKindStored} {
		s.decisions.byKind.WithLabelValues(k, metrics.OutcomeIssued)
	}

	s.decisions.byKind.WithLabelValues(tokenKindNone, reasonInvalidToken)

	synced := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: metrics.TrustdTimeSynced, Help: "1 while trustd's time gate is open (it signs), else 0.",
	}, func() float64 {
		if s.cfg.TimeGate.Synced() {
			return 1
		}

		return 0
	})

	for _, c := range []prometheus.Collector{s.decisions.issued, s.decisions.refused, s.decisions.byKind, synced} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}

	if err := metrics.RegisterConnections(reg, s.conns.Stats, MaxConnections, MaxConnectionsPerSource); err != nil {
		return err
	}

	return metrics.RegisterCertificates(reg, s.certificates)
}

// certificates are the server certificate and the CAs trustd hands out.
func (s *Server) certificates() []metrics.Certificate {
	var out []metrics.Certificate

	if c, err := s.cfg.Certificate.GetCertificate(&tls.ClientHelloInfo{}); err == nil && c.Leaf != nil {
		out = append(out, metrics.Certificate{Name: "server", Cert: c.Leaf})
	}

	if set := s.cfg.CAs.AcceptedCAs(); set != nil {
		for _, c := range set.Certificates() {
			out = append(out, metrics.Certificate{Name: "accepted_ca", Cert: c})
		}
	}

	return out
}
