package sanpolicy

import (
	"fmt"
	"strings"

	"github.com/aegis-os/aegis/ca"
)

// dnsPattern is a parsed DNS pattern. The first label is either a literal
// (wild false, pre holds it) or pre*post; rest is everything after the first
// label including its leading dot, or empty for a single-label pattern.
type dnsPattern struct {
	wild      bool
	pre, post string
	rest      string
}

func parseDNSPattern(s string) (dnsPattern, error) {
	s = strings.ToLower(s)
	first, rest := splitFirstLabel(s)

	if strings.Contains(rest, "*") {
		return dnsPattern{}, fmt.Errorf("%w: %q: a wildcard may appear only in the first label", ErrBadPattern, s)
	}

	if strings.Count(first, "*") > 1 {
		return dnsPattern{}, fmt.Errorf("%w: %q: at most one wildcard", ErrBadPattern, s)
	}

	if first == "*" && rest == "" {
		return dnsPattern{}, fmt.Errorf("%w: %q would match every single-label name", ErrBadPattern, s)
	}

	// Checking the name with the wildcard replaced by one letter applies
	// ca's hostname syntax to everything around the wildcard.
	if err := ca.CheckDNSName(strings.Replace(s, "*", "x", 1)); err != nil {
		return dnsPattern{}, fmt.Errorf("%w: %q: %w", ErrBadPattern, s, err)
	}

	pre, post, wild := strings.Cut(first, "*")

	return dnsPattern{wild: wild, pre: pre, post: post, rest: rest}, nil
}

// match reports whether the lower-cased name matches.
func (d dnsPattern) match(name string) bool {
	label, rest := splitFirstLabel(name)

	if rest != d.rest {
		return false
	}

	if !d.wild {
		return label == d.pre
	}

	// The wildcard stands for at least one character, so "node-*" never
	// matches the label "node-" (which ca refuses anyway).
	return len(label) > len(d.pre)+len(d.post) &&
		strings.HasPrefix(label, d.pre) && strings.HasSuffix(label, d.post) &&
		!strings.Contains(label, "*")
}

// String returns the pattern as Parse accepts it.
func (d dnsPattern) String() string {
	first := d.pre
	if d.wild {
		first = d.pre + "*" + d.post
	}

	if d.rest == "" {
		return first
	}

	return first + d.rest
}

// splitFirstLabel splits "a.b.c" into "a" and ".b.c", and "a" into "a" and "".
func splitFirstLabel(name string) (string, string) {
	if i := strings.IndexByte(name, '.'); i >= 0 {
		return name[:i], name[i:]
	}

	return name, ""
}
