package inherit

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParse(t *testing.T) {
	got, err := Parse(" 3=127.0.0.2:50000  4=[::1]:50001 ")
	if err != nil {
		t.Fatal(err)
	}

	if fmt.Sprint(got) != "[{3 127.0.0.2:50000} {4 [::1]:50001}]" {
		t.Fatalf("Parse = %v", got)
	}

	if got, err := Parse(""); err != nil || len(got) != 0 {
		t.Fatalf("Parse(\"\") = %v, %v; want nothing", got, err)
	}
}

func TestParseRefusesBadValues(t *testing.T) {
	for name, v := range map[string]string{
		"no descriptor":      "127.0.0.2:50000",
		"not a number":       "x=127.0.0.2:50000",
		"stdin":              "0=127.0.0.2:50000",
		"stderr":             "2=127.0.0.2:50000",
		"negative":           "-3=127.0.0.2:50000",
		"no port":            "3=127.0.0.2",
		"descriptor twice":   "3=127.0.0.2:50000 3=127.0.0.2:50001",
		"address twice":      "3=127.0.0.2:50000 4=127.0.0.2:50000",
		"separated by comma": "3=127.0.0.2:50000,4=127.0.0.2:50001",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(v)
			if !errors.Is(err, ErrBadValue) || !strings.Contains(err.Error(), EnvListeners) {
				t.Fatalf("Parse(%q) = %v, want ErrBadValue naming %s", v, err, EnvListeners)
			}
		})
	}
}

// inherited opens a socket listening on loopback and returns a copy of
// it as a bare descriptor, as an exec leaves it, and its address; the
// original is closed, so that the copy alone holds the socket.
func inherited(t *testing.T) (int, string) {
	t.Helper()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	f, err := l.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}

	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}

	f.Close()

	return fd, l.Addr().String()
}

// serves checks that a connection to addr is accepted on l.
func serves(t *testing.T, l net.Listener, addr string) {
	t.Helper()

	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("dialing %s: %v", addr, err)
	}
	defer c.Close()

	a, err := l.Accept()
	if err != nil {
		t.Fatalf("accepting on %s: %v", addr, err)
	}

	a.Close()
}

// TestAdoptTakesTheNamedSockets: a socket whose address matches is
// adopted, serves connections, and its copy is closed on exec; the
// inherited descriptor itself is closed.
func TestAdoptTakesTheNamedSockets(t *testing.T) {
	fd, addr := inherited(t)

	var s Set
	if err := s.Adopt(strconv.Itoa(fd) + "=" + addr); err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
		t.Fatalf("the inherited descriptor %d is still open (%v)", fd, err)
	}

	l, err := s.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}

	serves(t, l, addr)

	if flags := fdFlags(t, l); flags&unix.FD_CLOEXEC == 0 {
		t.Fatal("the adopted socket would be inherited by every child")
	}
}

// TestRetainClosesWhatTheConfigDoesNotName: an adopted socket the config
// does not name is closed, and its address refuses connections.
func TestRetainClosesWhatTheConfigDoesNotName(t *testing.T) {
	fd1, kept := inherited(t)
	fd2, dropped := inherited(t)

	var s Set
	if err := s.Adopt(fmt.Sprintf("%d=%s %d=%s", fd1, kept, fd2, dropped)); err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	s.Retain(kept, "127.0.0.1:1")

	if got := s.Addrs(); len(got) != 1 || got[0] != kept {
		t.Fatalf("held %v, want only %s", got, kept)
	}

	if c, err := net.DialTimeout("tcp", dropped, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections", dropped)
	}

	l, _ := s.Listen(kept)
	serves(t, l, kept)
}

// TestAdoptRefusesAMismatch: a descriptor that does not hold the address
// named with it, or is not a listening TCP socket, is refused, and the
// start with it; a descriptor that is no socket is left open.
func TestAdoptRefusesAMismatch(t *testing.T) {
	fd, addr := inherited(t)
	_, port, _ := net.SplitHostPort(addr)

	file, err := os.CreateTemp(t.TempDir(), "file")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	connFile, err := conn.(*net.TCPConn).File()
	if err != nil {
		t.Fatal(err)
	}
	defer connFile.Close()

	for _, tc := range []struct {
		name string
		// value is the EnvListeners value, given a fresh listening
		// descriptor (a refusal closes it) and its address.
		value func(fd int, addr string) string
		want  string
	}{
		{"another port", func(fd int, _ string) string { return fmt.Sprintf("%d=127.0.0.1:1", fd) }, ", not on 127.0.0.1:1"},
		{"another host", func(fd int, _ string) string { return fmt.Sprintf("%d=127.0.0.3:%s", fd, port) }, "not on 127.0.0.3:" + port},
		{"not a socket", func(int, string) string { return fmt.Sprintf("%d=127.0.0.1:1", file.Fd()) }, "is not a socket"},
		{"not listening", func(int, string) string { return fmt.Sprintf("%d=%s", connFile.Fd(), conn.LocalAddr()) }, "does not listen"},
		{"no such descriptor", func(int, string) string { return "999=127.0.0.1:1" }, "bad file descriptor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd, addr := inherited(t)
			v := tc.value(fd, addr)

			var s Set

			err := s.Adopt(v)
			if !strings.HasPrefix(v, strconv.Itoa(fd)+"=") {
				unix.Close(fd) //nolint:errcheck // the test's; a refusal closes the one it names
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), EnvListeners) {
				t.Fatalf("Adopt(%q) = %v, want an error saying %q and naming %s", v, err, tc.want, EnvListeners)
			}

			if len(s.Addrs()) != 0 {
				t.Fatalf("a refused value left %v held", s.Addrs())
			}
		})
	}

	if _, err := file.Stat(); err != nil {
		t.Fatalf("a descriptor that is no socket was closed: %v", err)
	}

	unix.Close(fd) //nolint:errcheck // the test's
}

// TestPassOn: the held sockets are named by descriptor and address, and
// are no longer closed on exec; a new machined adopting them serves the
// same socket.
func TestPassOn(t *testing.T) {
	var s Set
	defer s.Close()

	l, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	v, err := s.PassOn()
	if err != nil {
		t.Fatal(err)
	}

	fd := sysfd(t, l)
	if want := strconv.Itoa(fd) + "=127.0.0.1:0"; v != want {
		t.Fatalf("PassOn = %q, want %q", v, want)
	}

	if fdFlags(t, l)&unix.FD_CLOEXEC != 0 {
		t.Fatal("the socket would be closed by the exec")
	}

	if v, err := (&Set{}).PassOn(); v != "" || err != nil {
		t.Fatalf("PassOn of nothing = %q, %v", v, err)
	}
}

// TestSourceOpensOnce: every copy a Source gives is of one socket, opened
// on first use and held.
func TestSourceOpensOnce(t *testing.T) {
	var s Set
	defer s.Close()

	src := s.Source("127.0.0.1:0")

	for range 2 {
		f, err := src.File()
		if err != nil {
			t.Fatal(err)
		}

		f.Close()
	}

	if got := s.Addrs(); len(got) != 1 {
		t.Fatalf("held %v, want one socket", got)
	}

	var busy Set
	defer busy.Close()

	l, _ := s.Listen("127.0.0.1:0")
	if _, err := busy.Source(l.Addr().String()).File(); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("a taken address gave %v, want the bind's error", err)
	}
}

func sysfd(t *testing.T, l *net.TCPListener) int {
	t.Helper()

	rc, err := l.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}

	fd := -1
	if err := rc.Control(func(d uintptr) { fd = int(d) }); err != nil {
		t.Fatal(err)
	}

	return fd
}

func fdFlags(t *testing.T, l *net.TCPListener) int {
	t.Helper()

	flags, err := unix.FcntlInt(uintptr(sysfd(t, l)), unix.F_GETFD, 0)
	if err != nil {
		t.Fatal(err)
	}

	return flags
}
