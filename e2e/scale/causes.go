package scale

import (
	"cmp"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc/status"
)

// causes tallies the workers' failed calls by cause: what a run says
// refuses them, without the per-worker logs that would cost the run its
// CPU figures.
type causes struct {
	mu sync.Mutex
	n  map[string]int64
}

// add counts one failure of err.
func (c *causes) add(err error) {
	k := causeOf(err)

	c.mu.Lock()
	defer c.mu.Unlock()

	if c.n == nil {
		c.n = map[string]int64{}
	}

	c.n[k]++
}

// snapshot is the tally so far.
func (c *causes) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()

	return maps.Clone(c.n)
}

// Cause is one cause of failed calls and how often it failed them.
type Cause struct {
	Cause  string  `json:"cause"`
	PerSec float64 `json:"perSec"`
}

// topCauses are the causes that grew most from before to after over
// seconds, the most frequent first, at most n.
func topCauses(before, after map[string]int64, seconds float64, n int) []Cause {
	var out []Cause

	for k, v := range after {
		if d := v - before[k]; d > 0 && seconds > 0 {
			out = append(out, Cause{Cause: k, PerSec: float64(d) / seconds})
		}
	}

	slices.SortFunc(out, func(a, b Cause) int {
		return cmp.Or(cmp.Compare(b.PerSec, a.PerSec), cmp.Compare(a.Cause, b.Cause))
	})

	return out[:min(n, len(out))]
}

var (
	// addrPattern matches the addresses, ports and figures that differ
	// between workers' failures of one cause.
	addrPattern = regexp.MustCompile(`\[[0-9a-fA-F:]+\](:\d+)?|\d+(\.\d+){3}(:\d+)?|\d+`)
	// maxCause bounds a cause's text.
	maxCause = 160
)

// causeOf is err's status code and message, with addresses and figures
// blanked, so that the failures of one cause count together.
func causeOf(err error) string {
	s := status.Convert(err)
	k := s.Code().String() + ": " + addrPattern.ReplaceAllString(s.Message(), "N")
	// The errors of several endpoints come joined by newlines: one line
	// in the table.
	k = strings.Join(strings.Fields(k), " ")

	if len(k) > maxCause {
		k = k[:maxCause]
	}

	return k
}
