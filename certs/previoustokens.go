package certs

import (
	"time"

	"github.com/aegis-os/aegis/token"
)

// PreviousToken is a former static token that trustd still accepts until
// Expires, as a static token rotation leaves it for the nodes that have not
// taken the new one yet.
type PreviousToken struct {
	Token   string    `yaml:"token"`
	Expires time.Time `yaml:"expires"`
}

// AcceptedToken is a parsed previous token.
type AcceptedToken struct {
	Token   token.Token
	Expires time.Time
}

// PreviousTrustdTokens returns the parsed previous tokens, expired ones
// included: trustd refuses those by its own clock.
func (c *MachineConfig) PreviousTrustdTokens() []AcceptedToken { return c.previous }

// validatePreviousTokens checks machine.previousTokens: well-formed, none
// the current token or another entry's, each with an expiry at most
// MaxPreviousTokenLife ahead. An expiry already past is no problem here,
// so that a node still boots once an overlap has ended (the token is
// refused then); a config applied over the API must not add one
// (CheckPreviousTokensExpiry).
func (c *MachineConfig) validatePreviousTokens(ps *problems, now time.Time) {
	m := &c.Machine
	c.previous = nil

	if len(m.PreviousTokens) > 0 && m.Type == NodeWorker {
		ps.add("machine.previousTokens", "only control planes accept tokens: must be empty on workers")
	}

	if n := len(m.PreviousTokens); n > MaxPreviousTokens {
		ps.add("machine.previousTokens", "%d entries, limit %d", n, MaxPreviousTokens)
	}

	seen := map[string]bool{m.Token: true}

	for i, p := range m.PreviousTokens {
		checkPreviousToken(ps, index("machine.previousTokens", i), p, m.Token, seen, now)

		if tok, err := token.Parse(p.Token); err == nil {
			c.previous = append(c.previous, AcceptedToken{Token: tok, Expires: p.Expires})
		}
	}
}

// checkPreviousToken checks one entry at path; seen holds the tokens of
// the entries before it and the current one.
func checkPreviousToken(ps *problems, path string, p PreviousToken, current string, seen map[string]bool, now time.Time) {
	before := len(*ps)

	checkToken(ps, path+".token", p.Token)

	switch {
	case len(*ps) > before:
	case p.Token == current:
		ps.add(path+".token", "is machine.token itself")
	case seen[p.Token]:
		ps.add(path+".token", "listed twice")
	}

	seen[p.Token] = true

	switch {
	case p.Expires.IsZero():
		ps.add(path+".expires", "required (an RFC 3339 time)")
	case p.Expires.Sub(now) > MaxPreviousTokenLife:
		ps.add(path+".expires", "%s is more than %s ahead", p.Expires.UTC().Format(time.RFC3339), MaxPreviousTokenLife)
	}
}

// CheckPreviousTokensExpiry checks, at time now, that c adds no previous
// token already expired to current: an entry current holds as it is may
// have expired meanwhile, so that a config read from a node can be applied
// back, but a new or changed entry must expire in the future.
func (c *MachineConfig) CheckPreviousTokensExpiry(what string, current *MachineConfig, now time.Time) error {
	key := func(p PreviousToken) string { return p.Token + " " + p.Expires.UTC().Format(time.RFC3339Nano) }
	held := map[string]bool{}

	if current != nil {
		for _, p := range current.Machine.PreviousTokens {
			held[key(p)] = true
		}
	}

	var ps problems

	for i, p := range c.Machine.PreviousTokens {
		if !now.Before(p.Expires) && !held[key(p)] {
			ps.add(index("machine.previousTokens", i)+".expires", "%s is not in the future",
				p.Expires.UTC().Format(time.RFC3339))
		}
	}

	return ps.err(what)
}
