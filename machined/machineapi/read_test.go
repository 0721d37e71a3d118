package machineapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/internal/testutil"
)

// startReadServer serves a Server of cfg (with the fields Read does not
// use left empty) on a Unix socket.
func startReadServer(t *testing.T, cfg Config) machine.MachineServiceClient {
	t.Helper()

	sock := filepath.Join(testutil.ShortTempDir(t), "m.sock")

	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}

	g := grpc.NewServer()
	New(cfg).Register(g)

	go g.Serve(lis) //nolint:errcheck // ends with Stop

	t.Cleanup(g.Stop)

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { conn.Close() })

	return machine.NewMachineServiceClient(conn)
}

// readAll reads a file through Read: its content, the size of each chunk,
// and the error that ended the stream (nil at its end).
func readAll(t *testing.T, c machine.MachineServiceClient, path string) ([]byte, []int, error) {
	t.Helper()

	stream, err := c.Read(context.Background(), &machine.ReadRequest{Path: path})
	if err != nil {
		t.Fatal(err)
	}

	var (
		all    bytes.Buffer
		chunks []int
	)

	for {
		d, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return all.Bytes(), chunks, nil
		}

		if err != nil {
			return all.Bytes(), chunks, err
		}

		all.Write(d.GetBytes())
		chunks = append(chunks, len(d.GetBytes()))
	}
}

var bootIDForm = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestReadBootID(t *testing.T) {
	var boot atomic.Value
	boot.Store("11111111-1111-4111-8111-111111111111")

	c := startReadServer(t, Config{BootID: func() string { return boot.Load().(string) }})

	got, _, err := readAll(t, c, BootIDPath)
	if err != nil || string(got) != "11111111-1111-4111-8111-111111111111\n" {
		t.Fatalf("boot_id = %q, %v", got, err)
	}

	// A reboot of the node: its boot ID changes.
	boot.Store("22222222-2222-4222-8222-222222222222")

	if got, _, err = readAll(t, c, BootIDPath); err != nil || string(got) != "22222222-2222-4222-8222-222222222222\n" {
		t.Fatalf("boot_id after a boot = %q, %v", got, err)
	}

	boot.Store("")

	if _, _, err = readAll(t, c, BootIDPath); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("no boot ID: %v", err)
	}
}

// TestReadBootIDOfServer: without Config.BootID, the server makes one
// that lasts as long as it does.
func TestReadBootIDOfServer(t *testing.T) {
	c := startReadServer(t, Config{})

	first, _, err := readAll(t, c, BootIDPath)
	if err != nil || !bootIDForm.MatchString(strings.TrimSuffix(string(first), "\n")) {
		t.Fatalf("boot_id = %q, %v", first, err)
	}

	if again, _, err := readAll(t, c, BootIDPath); err != nil || !bytes.Equal(again, first) {
		t.Fatalf("boot_id changed without a boot: %q then %q, %v", first, again, err)
	}
}

func TestNewBootID(t *testing.T) {
	seen := map[string]bool{}

	for range 100 {
		id, err := NewBootID(rand.Reader)
		if err != nil || !bootIDForm.MatchString(id) || seen[id] {
			t.Fatalf("NewBootID = %q, %v (seen: %v)", id, err, seen[id])
		}

		seen[id] = true
	}

	if _, err := NewBootID(bytes.NewReader(make([]byte, 15))); err == nil {
		t.Fatal("NewBootID with 15 random bytes succeeded")
	}

	id, err := NewBootID(bytes.NewReader(bytes.Repeat([]byte{0xff}, 16)))
	if err != nil || id != "ffffffff-ffff-4fff-bfff-ffffffffffff" {
		t.Fatalf("NewBootID of all ones = %q, %v", id, err)
	}
}

func TestReadHostStatistics(t *testing.T) {
	root := t.TempDir()
	cpuinfo := bytes.Repeat([]byte("processor\t: 0\nflags\t\t: fpu vme de pse tsc msr pae mce\n\n"), 1000) // more than a chunk

	for name, data := range map[string][]byte{
		"cpuinfo": cpuinfo, "meminfo": []byte("MemTotal: 8128464 kB\n"), "loadavg": []byte("0.10 0.20 0.30 1/300 4242\n"),
		"stat": []byte("cpu  1 2 3 4 5 6 7 8 9 10\n"), "uptime": []byte("1.00 2.00\n"),
	} {
		if err := os.WriteFile(filepath.Join(root, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	c := startReadServer(t, Config{ProcRoot: root})

	got, chunks, err := readAll(t, c, "/proc/cpuinfo")
	if err != nil || !bytes.Equal(got, cpuinfo) || len(chunks) < 2 {
		t.Fatalf("cpuinfo: %d bytes in %v, %v", len(got), chunks, err)
	}

	for _, n := range chunks {
		if n > ReadChunk {
			t.Fatalf("a chunk of %d bytes, more than ReadChunk (%d)", n, ReadChunk)
		}
	}

	for path, want := range map[string]string{
		"/proc/meminfo": "MemTotal: 8128464 kB\n", "/proc/loadavg": "0.10 0.20 0.30 1/300 4242\n", "/proc/stat": "cpu  1 2 3 4 5 6 7 8 9 10\n",
	} {
		if got, _, err := readAll(t, c, path); err != nil || string(got) != want {
			t.Errorf("%s = %q, %v", path, got, err)
		}
	}
}

// TestReadRefuses: any path but the exact ones of the list is refused,
// naming the path and the list; a listed file missing on the host is
// NotFound.
func TestReadRefuses(t *testing.T) {
	c := startReadServer(t, Config{ProcRoot: t.TempDir()})

	for _, path := range []string{
		"/etc/shadow", "/proc/uptime", "/proc/self/environ", "/proc/1/environ", "/proc/./meminfo", "/proc//meminfo",
		"proc/meminfo", "/proc/meminfo/", "/proc/sys/kernel/random/../random/boot_id", "", "/var/lib/aegis/config.yaml",
	} {
		_, _, err := readAll(t, c, path)

		st := status.Convert(err)
		if st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), `"`+path+`" is not served`) ||
			!strings.Contains(st.Message(), BootIDPath) || !strings.Contains(st.Message(), "/proc/meminfo") {
			t.Errorf("Read(%q): %v", path, err)
		}
	}

	if _, _, err := readAll(t, c, "/proc/meminfo"); status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "/proc/meminfo") {
		t.Errorf("Read of a listed file the host lacks: %v", err)
	}
}

func TestReadIsBounded(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "stat"), make([]byte, MaxReadSize+1), 0o600); err != nil {
		t.Fatal(err)
	}

	c := startReadServer(t, Config{ProcRoot: root})

	got, _, err := readAll(t, c, "/proc/stat")
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "larger than") || len(got) > MaxReadSize {
		t.Fatalf("Read of %d bytes: %d bytes, %v", MaxReadSize+1, len(got), err)
	}
}
