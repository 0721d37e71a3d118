package inherit

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// Adopt takes over the sockets an EnvListeners value names, as the
// machined an exec started: each descriptor must be a listening TCP
// socket bound to the address named with it. The inherited descriptors
// are replaced by copies closed on exec, so that no child of this process
// inherits them. On an error the sockets adopted so far are closed and
// the caller should refuse to start: the value came from a machined of
// this node, and does not say what its descriptors are.
func (s *Set) Adopt(value string) error {
	entries, err := Parse(value)
	if err != nil {
		return err
	}

	adopted := map[string]*net.TCPListener{}

	for _, e := range entries {
		l, err := Listener(e.FD, e.Addr)
		if err != nil {
			for _, l := range adopted {
				l.Close() //nolint:errcheck // refused
			}

			return fmt.Errorf("%w (named by %s)", err, EnvListeners)
		}

		adopted[e.Addr] = l
	}

	s.mu.Lock()
	defer s.mu.Unlock()

	if s.held == nil {
		s.held = map[string]*socket{}
	}

	for a, l := range adopted {
		if old, ok := s.held[a]; ok {
			old.stopRefusing()
			old.l.Close() //nolint:errcheck // replaced by the inherited one
		}

		// No process has it yet: the services of this machined start
		// within moments, or its clients are refused after HoldFor.
		s.held[a] = &socket{l: l}
		s.idleLocked(a, s.held[a])
	}

	return nil
}

// Listener takes the listening socket inherited at descriptor fd, which
// must be a TCP socket listening on addr (apid's and trustd's --listen-fd
// with their --listen). The descriptor is closed; the listener returned
// holds a copy that is closed on exec.
func Listener(fd int, addr string) (*net.TCPListener, error) {
	// Only a socket is wrapped, and so closed: a wrong number must not
	// close a descriptor the process uses for something else.
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("inherit: descriptor %d for %s: %w", fd, addr, err)
	}

	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("inherit: descriptor %d for %s is not a socket", fd, addr)
	}

	f := os.NewFile(uintptr(fd), "listener "+addr)
	defer f.Close() //nolint:errcheck // the listener holds its own copy

	l, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("inherit: descriptor %d for %s: %w", fd, addr, err)
	}

	tl, ok := l.(*net.TCPListener)
	if !ok {
		l.Close() //nolint:errcheck // refused

		return nil, fmt.Errorf("inherit: descriptor %d for %s is a %s socket, not TCP", fd, addr, l.Addr().Network())
	}

	if err := checkListener(tl, addr); err != nil {
		tl.Close() //nolint:errcheck // refused

		return nil, fmt.Errorf("inherit: descriptor %d: %w", fd, err)
	}

	return tl, nil
}

// checkListener makes sure l listens, on addr: the same port, and the
// same IP unless addr's host is a name.
func checkListener(l *net.TCPListener, addr string) error {
	listening, err := acceptsConnections(l)
	if err != nil {
		return err
	}

	if !listening {
		return fmt.Errorf("the socket for %s does not listen", addr)
	}

	bound, _ := l.Addr().(*net.TCPAddr) //nolint:errcheck // a TCP listener's
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}

	want, err := net.LookupPort("tcp", port)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}

	if bound.Port != want || !sameHost(bound.IP, host) {
		return fmt.Errorf("the socket listens on %s, not on %s", bound, addr)
	}

	return nil
}

// sameHost reports whether a socket bound to ip serves host: the same IP,
// or both unspecified (an empty host is). A name is not checked.
func sameHost(ip net.IP, host string) bool {
	if host == "" {
		return ip.IsUnspecified()
	}

	want := net.ParseIP(host)
	if want == nil {
		return true
	}

	return want.Equal(ip) || (want.IsUnspecified() && ip.IsUnspecified())
}

// acceptsConnections reports whether l's socket listens (SO_ACCEPTCONN).
func acceptsConnections(l *net.TCPListener) (bool, error) {
	rc, err := l.SyscallConn()
	if err != nil {
		return false, err
	}

	var (
		v    int
		gerr error
	)

	if err := rc.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ACCEPTCONN) }); err != nil {
		return false, err
	}

	return v == 1, gerr
}
