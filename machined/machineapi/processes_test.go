package machineapi

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// fakeProc writes /proc/PID/{stat,cmdline} for a process named comm with parent ppid.
func fakeProc(t *testing.T, root string, pid int, comm string, ppid int, args ...string) {
	t.Helper()

	dir := filepath.Join(root, itoa(pid))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}

	stat := itoa(pid) + " (" + comm + ") S " + itoa(ppid) + " 1 1 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 7 0 100 123456 10 18446744073709551615"
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o600); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(filepath.Join(dir, "cmdline"), []byte(strings.Join(args, "\x00")), 0o600); err != nil {
		t.Fatal(err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestProcessesListsTheNodesTreeOnly: machined, its children and theirs;
// never the host's other processes.
func TestProcessesListsTheNodesTreeOnly(t *testing.T) {
	root := t.TempDir()
	fakeProc(t, root, 1, "systemd", 0)
	fakeProc(t, root, 40, "machined", 1, "/bin/machined", "--config", "c.yaml")
	fakeProc(t, root, 41, "apid", 40)
	fakeProc(t, root, 42, "odd) name (x", 41)
	fakeProc(t, root, 50, "sshd", 1)

	s := New(Config{ProcRoot: root, RootPID: 40})

	resp, err := s.Processes(context.Background(), &emptypb.Empty{})
	if err != nil {
		t.Fatal(err)
	}

	var got []string
	for _, p := range resp.GetMessages()[0].GetProcesses() {
		got = append(got, p.GetCommand())
	}

	if strings.Join(got, ",") != "machined,apid,odd) name (x" {
		t.Fatalf("processes = %q", got)
	}

	m := resp.GetMessages()[0].GetProcesses()[0]
	if m.GetArgs() != "/bin/machined --config c.yaml" || m.GetPpid() != 1 || m.GetThreads() != 7 || m.GetCpuTime() != 3 ||
		m.GetVirtualMemory() != 123456 || m.GetResidentMemory() != 10*uint64(os.Getpagesize()) {
		t.Fatalf("machined = %v", m)
	}
}

type dataStream struct {
	grpc.ServerStream
	ctx  context.Context
	sent []string
}

func (d *dataStream) Context() context.Context { return d.ctx }

func (d *dataStream) Send(m *common.Data) error {
	d.sent = append(d.sent, string(m.GetBytes()))

	return nil
}

func TestDmesgRefusedOnAHostSaysWhy(t *testing.T) {
	err := New(Config{}).Dmesg(&machine.DmesgRequest{}, &dataStream{ctx: context.Background()})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "belongs to the host") {
		t.Fatalf("err = %v", err)
	}
}

func TestDmesgReadsTheKernelLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kmsg")
	if err := os.WriteFile(path, []byte("6,1,100,-;hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	ds := &dataStream{ctx: context.Background()}
	if err := New(Config{KernelLog: path}).Dmesg(&machine.DmesgRequest{}, ds); err != nil {
		t.Fatal(err)
	}

	if strings.Join(ds.sent, "") != "6,1,100,-;hello\n" {
		t.Fatalf("sent %q", ds.sent)
	}
}
