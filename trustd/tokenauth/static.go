package tokenauth

import (
	"time"

	"github.com/aegis-os/aegis/sanpolicy"
	"github.com/aegis-os/aegis/token"
	"github.com/aegis-os/aegis/trustd"
)

// Previous is a former static token, accepted until Expires: the overlap
// of a static token rotation, during which nodes not yet given the new
// token still join with the old one.
type Previous struct {
	Token   token.Token
	Expires time.Time
}

// staticToken is the machine config's token, its names and the previous
// tokens still accepted with them.
type staticToken struct {
	tok      token.Token
	sans     *sanpolicy.Policy
	previous []Previous
}

func newStaticToken(tok token.Token, sans *sanpolicy.Policy, previous []Previous) *staticToken {
	kept := make([]Previous, 0, len(previous))
	for _, p := range previous {
		if !p.Token.IsZero() {
			kept = append(kept, p)
		}
	}

	return &staticToken{tok: tok, sans: sans, previous: kept}
}

// staticMatch says which of the static tokens a presented token is.
type staticMatch int

const (
	matchNone     staticMatch = iota
	matchCurrent              // the machine config's token
	matchPrevious             // a previous token within its overlap
	matchExpired              // a previous token past its expiry
)

func (m staticMatch) accepted() bool { return m == matchCurrent || m == matchPrevious }

// match compares tok with the current token and every previous one, all
// in constant time and all of them whatever matched, so that the timing
// tells nothing of which matched. A previous token counts until its
// expiry by the authenticator's clock, whether or not the config has
// dropped it yet.
func (s *staticToken) match(tok token.Token, now time.Time) staticMatch {
	m := matchNone
	if !s.tok.IsZero() && s.tok.Equal(tok) {
		m = matchCurrent
	}

	for _, p := range s.previous {
		equal := p.Token.Equal(tok)

		switch {
		case !equal || m != matchNone:
		case now.Before(p.Expires):
			m = matchPrevious
		default:
			m = matchExpired
		}
	}

	return m
}

// grant is what an accepted static token obtains. It is marked Static,
// and Previous when it is a previous token, so that the audit record says
// which one a join used.
func (s *staticToken) grant(tok token.Token, m staticMatch) trustd.Grant {
	return trustd.Grant{TokenID: tok.ID(), Static: true, Previous: m == matchPrevious, AllowedSANs: s.sans}
}
