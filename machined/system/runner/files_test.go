package runner

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/aegis-os/aegis/internal/logtest"
)

// TestProcessInheritsFiles: each start gives the process a copy of every
// source as descriptors 3, 4, …; machined's copies are closed.
func TestProcessInheritsFiles(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()

	src := &countingSource{l: lis.(*net.TCPListener)}

	var out logtest.Sink

	r := Process(ProcessConfig{Path: "/bin/sh", Args: []string{"-c", "readlink /proc/self/fd/3"}, Log: &out, Files: []FileSource{src}})
	for range 2 {
		if err := r.Run(context.Background(), func(bool, string) {}); err != nil {
			t.Fatal(err)
		}
	}

	if got := out.String(); strings.Count(got, "socket:[") != 2 {
		t.Fatalf("descriptor 3 of the process: %q, want a socket at each start", got)
	}

	if src.opened != 2 || src.released != 2 {
		t.Fatalf("%d copies opened and %d released, want one of each per start (released once the process ended)", src.opened, src.released)
	}

	for _, f := range src.files {
		if _, err := f.Stat(); !errors.Is(err, os.ErrClosed) {
			t.Fatalf("machined's copy %s is still open (%v)", f.Name(), err)
		}
	}
}

// TestProcessFileSourceFailure: a source that cannot give its file fails
// the start, naming the binary; a source that gave its file before it is
// released again.
func TestProcessFileSourceFailure(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()

	gave := &countingSource{l: lis.(*net.TCPListener)}
	r := Process(ProcessConfig{Path: "/bin/true", Files: []FileSource{gave, failingSource{}}})

	err = r.Run(context.Background(), func(bool, string) {})
	if err == nil || !strings.Contains(err.Error(), "/bin/true") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("err = %v, want the source's error naming the binary", err)
	}

	if gave.opened != 1 || gave.released != 1 {
		t.Fatalf("the source before the failing one: %d opened, %d released; want it released", gave.opened, gave.released)
	}
}

type countingSource struct {
	l                *net.TCPListener
	opened, released int
	files            []*os.File
}

func (c *countingSource) Release() { c.released++ }

func (c *countingSource) File() (*os.File, error) {
	f, err := c.l.File()
	c.opened++
	c.files = append(c.files, f)

	return f, err
}

type failingSource struct{}

func (failingSource) File() (*os.File, error) { return nil, errors.New("address already in use") }
