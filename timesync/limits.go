package timesync

import "time"

// Defaults and bounds of the time service, in one place.
const (
	// DefaultMaxOffset is how far the local clock may be from an NTP
	// server's for the gate to open, the machine config's default.
	DefaultMaxOffset = time.Second

	// DefaultPollInterval is the wait between queries while the clock is
	// within bounds: NTP's own default maximum poll is 1024s, but a gate
	// that guards certificate signing should notice a drifting or stepped
	// clock within minutes, and one query every 64s costs nothing.
	DefaultPollInterval = 64 * time.Second

	// DefaultRetryMin and DefaultRetryMax bound the backoff between rounds
	// that gave no usable answer (no server reachable, or the clock out of
	// bounds): fast at boot, when a node waits on its first sync, and
	// gentle on servers that are down.
	DefaultRetryMin = time.Second
	DefaultRetryMax = 30 * time.Second

	// DefaultQueryTimeout bounds one NTP query, beevik/ntp's own default.
	DefaultQueryTimeout = 5 * time.Second

	// MaxServers bounds the servers queried in one round, the machine
	// config's list limit.
	MaxServers = 64
)
