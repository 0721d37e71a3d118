// Package spread orders a node's control planes by rendezvous hashing, so
// that many nodes spread evenly over them and each keeps to its own: the
// worker's join (client/join) and its later calls to trustd
// (machined/trustdclient) go first to the same control plane, which has
// then seen the node before its node certificate is presented.
package spread

import (
	"crypto/sha256"
	"encoding/binary"
	"io"
	"slices"
)

// Preference orders the endpoints for one node by rendezvous hashing: each
// endpoint scores hash(identity, endpoint) and the highest score is the
// node's own control plane. Over many nodes every endpoint comes first for
// an even share of them; adding or removing an endpoint moves only the
// nodes whose first choice it is (or becomes), and when one fails its
// nodes spread over the others in the same way, rather than all moving to
// the next in the list.
func Preference(identity []byte, endpoints []string) []int {
	scores := make([]uint64, len(endpoints))
	for i, ep := range endpoints {
		scores[i] = score(identity, ep)
	}

	order := make([]int, len(endpoints))
	for i := range order {
		order[i] = i
	}

	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case scores[a] > scores[b]:
			return -1
		case scores[a] < scores[b]:
			return 1
		default:
			return 0
		}
	})

	return order
}

// score is the rendezvous weight of endpoint for identity. SHA-256 mixes
// well enough that addresses differing in one byte land anywhere; it runs
// once per endpoint, when the Client is made.
func score(identity []byte, endpoint string) uint64 {
	h := sha256.New()
	_ = binary.Write(h, binary.BigEndian, uint32(len(identity)))
	h.Write(identity)
	io.WriteString(h, endpoint)

	return binary.BigEndian.Uint64(h.Sum(nil))
}
