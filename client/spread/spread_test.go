package spread

import (
	"fmt"
	"testing"
)

// identities are n node addresses, as a cluster's workers would have.
func identities(n int) [][]byte {
	ids := make([][]byte, n)
	for i := range ids {
		ids[i] = fmt.Appendf(nil, "10.%d.%d.%d", 1+i>>16, i>>8&0xff, i&0xff)
	}

	return ids
}

// TestPreferenceSpreadsEvenly: 10,000 workers over three control planes
// prefer each within 3 % of a third, and their second choices, where
// they go when their own fails, spread as evenly over the two others.
func TestPreferenceSpreadsEvenly(t *testing.T) {
	endpoints := []string{"10.5.0.2:50001", "10.5.0.3:50001", "10.5.0.4:50001"}
	ids := identities(10000)

	first := make([]int, len(endpoints))
	second := map[[2]int]int{}

	for _, id := range ids {
		order := Preference(id, endpoints)
		first[order[0]]++
		second[[2]int{order[0], order[1]}]++
	}

	even := float64(len(ids)) / float64(len(endpoints))
	for i, n := range first {
		if d := float64(n)/even - 1; d > 0.03 || d < -0.03 {
			t.Errorf("%s is preferred by %d workers, %.1f %% off an even %.0f", endpoints[i], n, 100*d, even)
		}
	}

	for pair, n := range second {
		if d := float64(n)/(even/2) - 1; d > 0.05 || d < -0.05 {
			t.Errorf("%d workers of %s go to %s next, %.1f %% off an even %.0f",
				n, endpoints[pair[0]], endpoints[pair[1]], 100*d, even/2)
		}
	}

	t.Logf("preferred: %v of %d; next choices: %v", first, len(ids), second)
}

// TestPreferenceMovesOnlyTheShareOfAChangedEndpoint: adding a fourth
// control plane moves only the workers that now prefer it; removing one
// moves only those that preferred it.
func TestPreferenceMovesOnlyTheShareOfAChangedEndpoint(t *testing.T) {
	three := []string{"10.5.0.2:50001", "10.5.0.3:50001", "10.5.0.4:50001"}
	four := append(append([]string(nil), three...), "10.5.0.5:50001")

	moved := 0

	for _, id := range identities(10000) {
		before := three[Preference(id, three)[0]]
		after := four[Preference(id, four)[0]]

		switch {
		case after == four[3]:
			moved++
		case after != before:
			t.Fatalf("worker %s moved from %s to %s, neither of them added", id, before, after)
		}

		// Removing the first endpoint again: only its workers move.
		two := three[1:]
		if rest := two[Preference(id, two)[0]]; before != three[0] && rest != before {
			t.Fatalf("worker %s moved from %s to %s when %s was removed", id, before, rest, three[0])
		}
	}

	if d := float64(moved)/2500 - 1; d > 0.05 || d < -0.05 {
		t.Errorf("%d of 10,000 workers moved to the fourth control plane, want about a quarter", moved)
	}
}
