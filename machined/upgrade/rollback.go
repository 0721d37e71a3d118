package upgrade

import (
	"bytes"
	"encoding/json"
	"time"
)

// Rollback is a switch back to the version kept, as the node recorded it
// for the operator (and for aegisctl upgrade, which stops at a member
// that went back).
type Rollback struct {
	// At is the node's time of the rollback.
	At time.Time `json:"at"`
	// From is the version left; To the one returned to.
	From string `json:"from"`
	To   string `json:"to"`
	// Reason says why: the failed trial, or the operator's request.
	Reason string `json:"reason"`
	// ByNode is set when the node went back by itself (a failed trial),
	// unset for a Rollback asked through the API.
	ByNode bool `json:"by_node,omitempty"`
}

// UnmarshalJSON reads a Rollback, or the bare reason that state files
// written before the rollback was recorded in full hold.
func (r *Rollback) UnmarshalJSON(raw []byte) error {
	if bytes.HasPrefix(bytes.TrimSpace(raw), []byte(`"`)) {
		*r = Rollback{}

		return json.Unmarshal(raw, &r.Reason)
	}

	type plain Rollback

	// Fields a later version adds are ignored, as in the whole file (Load).
	return json.Unmarshal(raw, (*plain)(r))
}
