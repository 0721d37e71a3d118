package upgrade

import "time"

// Limits of a node's upgrade, in one place.
const (
	// TrialTimeout is how long a new version has to become healthy (all
	// its services up, etcd healthy on a control plane, apid serving)
	// before the node goes back to the version it kept. A node boots in
	// a few seconds; etcd's join of a restarted member takes up to a
	// minute on a slow disk; two minutes is both with room and still
	// short enough that a bad release is undone before an operator acts.
	TrialTimeout = 2 * time.Minute

	// MinTrialTimeout and MaxTrialTimeout bound a configured trial: under
	// a few seconds no node is healthy, over half an hour a bad release
	// stays in place for longer than anyone waits for it.
	MinTrialTimeout = 5 * time.Second
	MaxTrialTimeout = 30 * time.Minute

	// MaxTrialStarts is how many times machined may start a version on
	// trial before the node goes back: the first start and two restarts
	// (a crash, a supervisor's restart) give a version that crashes at
	// start no fourth chance.
	MaxTrialStarts = 3

	// CrashLoopExits is how many exits in a row, without coming up, of one
	// service of a version on trial end the trial at once (CrashLoop).
	CrashLoopExits = 3

	// MaxUpload bounds one uploaded bundle: the bundle's own bound on
	// its files (bundle.MaxSize) with room for the archive's headers and
	// the manifest; gzip only makes it smaller.
	MaxUpload = 1<<30 + 1<<20

	// MaxStateFile bounds the slot state read at start: a few hundred
	// bytes of JSON, so 64 KiB refuses only a damaged file.
	MaxStateFile = 64 << 10
)
