package metrics

import "github.com/prometheus/client_golang/prometheus"

// HandshakeRefusalCounter counts one listener's refused TLS handshakes
// (HandshakesRefused) by reason. A nil one counts nothing.
type HandshakeRefusalCounter struct {
	vec      *prometheus.CounterVec
	listener string
}

// NewHandshakeRefusals registers the counter of listener's refusals in
// reg, a series at 0 for each of reasons (the fixed set the listener
// tells apart) so that a rate works before the first refusal; a nil reg
// returns nil.
func NewHandshakeRefusals(reg prometheus.Registerer, listener string, reasons ...string) (*HandshakeRefusalCounter, error) {
	if reg == nil {
		return nil, nil
	}

	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: HandshakesRefused, Help: "TLS handshakes a listener refused, by reason.",
	}, []string{LabelListener, LabelReason})

	for _, r := range reasons {
		vec.WithLabelValues(listener, r)
	}

	if err := reg.Register(vec); err != nil {
		return nil, err
	}

	return &HandshakeRefusalCounter{vec: vec, listener: listener}, nil
}

// Count counts one refusal of reason, one of the set the listener tells
// apart.
func (c *HandshakeRefusalCounter) Count(reason string) {
	if c == nil {
		return
	}

	c.vec.WithLabelValues(c.listener, reason).Inc()
}
