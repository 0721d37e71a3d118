package machineapi

import "time"

// Limits of machined's API socket, in one place.
const (
	// MaxUploadChunk bounds one chunk of a bundle upload: 1 MiB keeps a
	// message well under gRPC's default 4 MiB receive bound on every hop
	// (apid forwards the frames as they are), and a gigabyte-sized bundle
	// is still a thousand messages, not a million.
	MaxUploadChunk = 1 << 20

	// MaxCalls bounds the calls machined serves at once on its API socket,
	// Logs and Events follows included, and is what it announces in HTTP/2
	// as the streams one connection may open. Its caller is the node's
	// apid, which holds at most 640 calls open (apid.MaxStreams and its
	// headroom for unary calls) however many clients it serves; an eighth
	// more leaves room for the calls of an apid that was restarted and
	// whose old connection is still closing. A follow costs machined about
	// 14 KiB, and one whose reader has stopped up to a 64 KiB window of data
	// queued and a 32 KiB chunk of log in hand: this keeps follows under
	// about 80 MiB whatever apid lets through.
	MaxCalls = 720

	// ReclaimAfter is the open calls from which, once they are mostly
	// closed again, machined hands the memory they took back to the
	// system (internal/reclaim).
	ReclaimAfter = 128

	// WindowSize and ConnWindowSize are the fixed HTTP/2 flow-control
	// windows of a call and of a connection on the API socket, apid's own
	// (apid.WindowSize, apid.ConnWindowSize). Requests are small, and
	// uploads (a snapshot to recover) cross a Unix socket; a fixed window
	// turns off gRPC's bandwidth estimator, which pinged apid on the first
	// request data after each answered ping: a PING and its ACK on calls
	// made one after the other.
	WindowSize     = 64 << 10
	ConnWindowSize = 1 << 20

	// MaxProcesses bounds the processes one Processes reply lists: a
	// node's own tree is a few dozen (machined, its services, containerd
	// and its shims); a few thousand keep the reply under a megabyte
	// whatever a container forks.
	MaxProcesses = 4096
	// MaxProcessesRead bounds the /proc entries read for one reply, on a
	// host with many more processes than the node has.
	MaxProcessesRead = 1 << 16

	// MaxKernelRecord is the buffer for one kernel log record: the kernel
	// writes at most about 8 KiB per record to /dev/kmsg.
	MaxKernelRecord = 16 << 10

	// ReadChunk is the most one message of Read carries: a few pages,
	// small next to WindowSize, so that a slow reader holds little.
	ReadChunk = 16 << 10
	// MaxReadSize bounds what Read sends of one file: the files it serves
	// are a few kilobytes (/proc/cpuinfo of a host with a thousand CPUs is
	// about 1.5 MiB), and a file that grows without end (none should) must
	// not hold a call open.
	MaxReadSize = 4 << 20

	// MaxConfigSize bounds the machine config ApplyConfiguration takes:
	// the bound of every YAML document Aegis reads (certs.MaxDocumentSize),
	// a few hundred times an honest config.
	MaxConfigSize = 1 << 20

	// DefaultTryTimeout is how long a TRY apply stays unless confirmed,
	// when the request names no timeout: Talos's default.
	DefaultTryTimeout = time.Minute
	// MaxTryTimeout bounds try_mode_timeout: a trial is meant to be
	// checked and confirmed (or left to roll back) by someone watching.
	MaxTryTimeout = 24 * time.Hour
)
