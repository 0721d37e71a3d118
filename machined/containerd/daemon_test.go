package containerd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSocketPath(t *testing.T) {
	short := "/tmp/ae1/node/containerd"
	if got := socketPath(short, "/run/aegis"); got != filepath.Join(short, "containerd.sock") {
		t.Fatalf("short dir: socket %s", got)
	}

	long := "/home/someone/" + strings.Repeat("clusters/", 10) + "cp-1/state/containerd"
	a, b := socketPath(long, "/run/aegis"), socketPath(long, "/run/aegis")
	other := socketPath(long+"2", "/run/aegis")

	if a != b || a == other || !strings.HasPrefix(a, "/run/aegis/") || len(a)+len(".ttrpc") >= maxSocketName {
		t.Fatalf("long dir: sockets %s, %s, %s", a, b, other)
	}
}

func TestPrepareWritesConfigUnderDir(t *testing.T) {
	dir := t.TempDir()

	d, err := New(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	if err := d.Prepare(); err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(filepath.Join(dir, "config.toml"))
	if err != nil {
		t.Fatal(err)
	}

	for _, want := range []string{
		`root = "` + dir + `/root"`, `state = "` + dir + `/state"`, `address = "` + d.Socket() + `"`,
		`"io.containerd.grpc.v1.cri"`, `"io.containerd.internal.v1.opt"`,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("config lacks %s:\n%s", want, data)
		}
	}
}
