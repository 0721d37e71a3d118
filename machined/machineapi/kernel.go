package machineapi

import (
	"context"
	"errors"
	"io"
	"os"
	"syscall"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
)

// errHostKernelLog is Dmesg's refusal on a node that runs as a process on a
// host: the kernel and its log are the host's, shared with everything else
// the host runs, and a node serves only what is its own.
var errHostKernelLog = refuse(ErrNotHere,
	"Dmesg: this node runs as a process on a host, not as the host's init (PID 1); "+
		"the kernel log belongs to the host and the node does not serve it")

// Dmesg streams the kernel ring buffer, one record per message, and with
// follow the records that come after, until the caller leaves. Only a
// node that is the host's init reads it (Config.KernelLog).
func (s *Server) Dmesg(req *machine.DmesgRequest, stream grpc.ServerStreamingServer[common.Data]) error {
	if s.cfg.KernelLog == "" {
		return s.toStatus("Dmesg", errHostKernelLog)
	}

	flags := os.O_RDONLY
	if !req.GetFollow() {
		flags |= syscall.O_NONBLOCK
	}

	f, err := os.OpenFile(s.cfg.KernelLog, flags, 0)
	if err != nil {
		return s.toStatus("Dmesg", refusef(ErrNotHere, "Dmesg: the kernel log cannot be read: %v", err))
	}

	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()

	go func() { <-ctx.Done(); f.Close() }() //nolint:errcheck // unblocks the read

	buf := make([]byte, MaxKernelRecord)

	for {
		n, err := f.Read(buf)
		if n > 0 {
			if err := stream.Send(&common.Data{Bytes: append([]byte(nil), buf[:n]...)}); err != nil {
				return err
			}
		}

		switch {
		case errors.Is(err, io.EOF), errors.Is(err, syscall.EAGAIN), ctx.Err() != nil:
			return nil
		case errors.Is(err, syscall.EPIPE):
			// Records were overwritten before they were read: go on
			// with the next one.
		case err != nil:
			return s.toStatus("Dmesg", err)
		}
	}
}
