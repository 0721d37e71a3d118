// Package machineapi implements the Talos MachineService for a node run by
// machined: what the node is, its services, their logs, its events, client
// configurations, reboot, shutdown and reset. Methods it does not implement answer
// Unimplemented at once.
package machineapi

import (
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/internal/defaults"
	"github.com/aegis-os/aegis/internal/logkey"
	"github.com/aegis-os/aegis/machined/system"
	"github.com/aegis-os/aegis/machined/system/events"
	"github.com/aegis-os/aegis/machined/system/logs"
)

// LogSource finds the log of a service by its ID.
type LogSource interface {
	ServiceLog(id string) (*logs.Log, bool)
}

// Lifecycle is what Reboot and Shutdown ask of the node. Both act after the
// reply has been sent; actorID tags the events they cause.
type Lifecycle interface {
	Reboot(actorID string)
	Shutdown(actorID string)
}

// ClientConfigIssuer makes client credentials; only control planes have one.
type ClientConfigIssuer interface {
	// IssueClientConfig returns the CA bundle, a certificate with roles for
	// a new key, that key, and a client config holding the three.
	IssueClientConfig(roles role.Set, ttl time.Duration) (ca, crt, key, clientConfig []byte, err error)
}

// Config configures the server. Services, Logs, Bus and Lifecycle are required.
type Config struct {
	// Hostname returns the node's hostname; it may change at a reboot.
	Hostname  func() string
	Services  *system.Manager
	Logs      LogSource
	Bus       *events.Bus
	Lifecycle Lifecycle
	// Reset is the node's reset; nil refuses Reset as FailedPrecondition.
	Reset Resetter
	// ClientConfig is nil on workers: GenerateClientConfiguration then
	// answers FailedPrecondition.
	ClientConfig ClientConfigIssuer
	// Config applies and reads the machine config; nil answers
	// ApplyConfiguration with FailedPrecondition.
	Config Configurator
	// Etcd returns the node's etcd; nil, or an error, on nodes without one.
	Etcd func() (Etcd, error)
	// Upgrader installs release bundles and switches between the node's
	// slots; nil refuses Upgrade and Rollback as FailedPrecondition.
	Upgrader Upgrader
	// Uploads keeps the bundles the BundleService receives; nil refuses
	// Upload as FailedPrecondition.
	Uploads Receiver
	// Containers is the node's containerd; nil on a node that runs its
	// services as processes: the container methods then answer
	// FailedPrecondition.
	Containers Containers
	// BootID returns the node's boot ID, which Read serves as
	// /proc/sys/kernel/random/boot_id: a new one at each boot of the node
	// (see NewBootID). Nil means one made by New, for the life of the
	// server.
	BootID func() string
	// MemInfoPath is read by Memory; empty means /proc/meminfo.
	MemInfoPath string
	// ProcRoot is read by Processes, by Read and by the host statistics
	// (CPUInfo, LoadAvg, SystemStat, DiskStats, NetworkDeviceStats); empty
	// means /proc.
	ProcRoot string
	// SysRoot is read by CPUFreqStats; empty means /sys.
	SysRoot string
	// RootPID is the process whose tree Processes lists; zero means
	// machined's own.
	RootPID int32
	// KernelLog is the kernel log Dmesg reads (/dev/kmsg), set only on a
	// node that is its host's init; empty refuses Dmesg saying why.
	KernelLog string
	// Rand makes actor IDs and the references of internal errors. Nil
	// means crypto/rand.
	Rand io.Reader
	// Clock places tail_seconds. Nil means the system clock.
	Clock interface{ Now() time.Time }
	// Logger records failures whose cause is not sent to the caller. Nil
	// discards.
	Logger *slog.Logger
}

// Server implements machine.MachineServiceServer.
type Server struct {
	machine.UnimplementedMachineServiceServer

	cfg Config
}

// New returns a Server.
func New(cfg Config) *Server {
	if cfg.MemInfoPath == "" {
		cfg.MemInfoPath = "/proc/meminfo"
	}

	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}

	if cfg.SysRoot == "" {
		cfg.SysRoot = "/sys"
	}

	if cfg.RootPID == 0 {
		cfg.RootPID = int32(os.Getpid()) //nolint:gosec // a PID
	}

	cfg.Rand = defaults.Rand(cfg.Rand)
	cfg.Clock = defaults.Now(cfg.Clock)
	cfg.Logger = defaults.Logger(cfg.Logger)

	if cfg.BootID == nil {
		id, err := NewBootID(cfg.Rand)
		if err != nil {
			cfg.Logger.Error("no boot ID", slog.String(logkey.Error, err.Error()))
		}

		cfg.BootID = func() string { return id }
	}

	return &Server{cfg: cfg}
}

// Register adds the server to a gRPC server.
func (s *Server) Register(g *grpc.Server) { machine.RegisterMachineServiceServer(g, s) }
