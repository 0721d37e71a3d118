package talossuite

import "time"

// Bounds of a run. Talos's tests carry their own deadlines (most of two
// minutes, the etcd ones of thirty); these keep a hang of a whole process
// from costing more than one test's worth.
const (
	// TestTimeout bounds one test's process (the binary runs one test at a
	// time): Capabilities() alone may wait two minutes on a watch, and a
	// test's own body has two more.
	TestTimeout = 5 * time.Minute
	// BuildTimeout bounds the download and the two builds: from a cold Go
	// build cache both took 6.5 minutes on two shared cores (the test
	// binary compiles Kubernetes' client); a busier machine gets six times
	// that.
	BuildTimeout = 40 * time.Minute
	// VerbTimeout bounds one talosctl command; health and reboot wait the
	// longest.
	VerbTimeout = 3 * time.Minute
	// FollowFor is how long a following command (logs -f, events, get
	// --watch) runs before it is stopped: long enough for its first lines.
	FollowFor = 5 * time.Second
	// MaxErrorLine bounds the first error line kept for a report row.
	MaxErrorLine = 240
)
