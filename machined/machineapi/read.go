package machineapi

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
)

// BootIDPath is the file whose content a reboot's waiter compares before
// and after (talosctl reboot --wait, Talos's own tests): the kernel makes a
// new one at each boot of a host. Read serves the node's boot ID there.
const BootIDPath = "/proc/sys/kernel/random/boot_id"

// readable are the files Read serves, by the exact path a caller names.
// Besides the boot ID, they are host statistics the API serves in other
// forms already (Memory, and the CPU and load figures): public on the host,
// with no secret and nothing of another node or service in them. Nothing
// else is served: not the node's state directory (its config and keys are
// secrets, its logs have Logs), not other files of the host, not /proc of
// processes (their environment may hold secrets).
var readable = map[string]string{
	BootIDPath:      "", // the node's boot ID, not the host's
	"/proc/cpuinfo": "cpuinfo",
	"/proc/meminfo": "meminfo",
	"/proc/loadavg": "loadavg",
	"/proc/stat":    "stat",
}

// errBootID is Read's answer for the boot ID on a node that has none
// (BootID returned an empty string).
var errBootID = refuse(ErrNotHere, "Read: the node has no boot ID yet; try again once it has started")

// Read streams a file of the node, in chunks of at most ReadChunk bytes, as
// Talos does; only the files of readable are served (to os:admin alone,
// as in Talos), and at most MaxReadSize bytes of one.
func (s *Server) Read(req *machine.ReadRequest, stream grpc.ServerStreamingServer[common.Data]) error {
	path := req.GetPath()

	name, ok := readable[path]
	if !ok {
		return s.toStatus("Read", refuse(errUnreadable, fmt.Sprintf(
			"Read: %q is not served by Aegis nodes; they serve only %s", path, strings.Join(readablePaths(), ", "))))
	}

	if path == BootIDPath {
		id := s.cfg.BootID()
		if id == "" {
			return s.toStatus("Read", errBootID)
		}

		return stream.Send(&common.Data{Bytes: []byte(id + "\n")})
	}

	f, err := os.Open(filepath.Join(s.cfg.ProcRoot, name))
	if err != nil {
		return s.toStatus("Read", refusef(ErrNotFound, "Read: %s cannot be read on this node: %v", path, err))
	}
	defer f.Close() //nolint:errcheck // read-only

	return s.toStatus("Read", sendChunks(f, path, stream))
}

// sendChunks sends what r holds, ReadChunk bytes at most a message, and
// fails once more than MaxReadSize bytes have been read.
func sendChunks(r io.Reader, path string, stream grpc.ServerStreamingServer[common.Data]) error {
	buf := make([]byte, ReadChunk)
	total := 0

	for {
		n, err := io.ReadFull(r, buf)
		if total += n; total > MaxReadSize {
			return refusef(ErrNotHere, "Read: %s is larger than the %d bytes a node serves of one file", path, MaxReadSize)
		}

		if n > 0 {
			if sendErr := stream.Send(&common.Data{Bytes: append([]byte(nil), buf[:n]...)}); sendErr != nil {
				return sendErr
			}
		}

		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return nil
		case err != nil:
			return err
		}
	}
}

// readablePaths lists readable's paths, sorted, for refusals.
func readablePaths() []string {
	paths := make([]string, 0, len(readable))
	for p := range readable {
		paths = append(paths, p)
	}

	slices.Sort(paths)

	return paths
}

// NewBootID returns a boot ID in the kernel's form: a random (version 4)
// UUID in lowercase, "1b4e28ba-2fa1-4d2e-883f-0016d3cca427".
func NewBootID(r io.Reader) (string, error) {
	var b [16]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", fmt.Errorf("machineapi: boot ID: %w", err)
	}

	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant

	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}
