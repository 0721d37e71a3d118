package main

import "time"

// Limits and timings of the node commands, in one place.
const (
	// renewTimeout bounds a renewal of the client certificate: a signature
	// on a control plane takes milliseconds, so a renewal that takes longer
	// is failing, and the command it runs before should not wait on it.
	renewTimeout = 30 * time.Second

	// defaultHealthTimeout is how long health waits by default: a local
	// cluster is up in seconds, a node rebooting in well under a minute.
	defaultHealthTimeout = 5 * time.Minute

	// healthPollInterval is the pause between two rounds of health checks:
	// often enough to see a node come up, rarely enough to be no load.
	healthPollInterval = time.Second

	// healthCallTimeout bounds one round's calls, so a node that hangs
	// shows as not answering instead of stalling the wait.
	healthCallTimeout = 10 * time.Second

	// completionTimeout bounds the call a shell completion makes (the
	// service IDs of the nodes): a person is waiting at the prompt, and a
	// node that does not answer at once gets the static list instead.
	completionTimeout = 2 * time.Second
)

// Timings of token rotate-static.
const (
	// minRotationOverlap is the shortest overlap rotate-static takes: the
	// workers' configs are updated within it, one call each, and a shorter
	// one could end before the last worker has the new token.
	minRotationOverlap = time.Minute

	// rotateStaticCallTimeout bounds one read or apply of a member's
	// config, so a member that hangs is named instead of stalling the
	// rotation.
	rotateStaticCallTimeout = 30 * time.Second

	// rotateStaticTrustdWait bounds the wait for a control plane's trustd
	// to follow its applied config, which it does within moments.
	rotateStaticTrustdWait = 15 * time.Second

	// rotateStaticProbeInterval spaces the probes of trustd while it has
	// not followed yet: each one refused counts against the caller's
	// failure budget there (trustd.DefaultFailureBurst).
	rotateStaticProbeInterval = 500 * time.Millisecond
)
