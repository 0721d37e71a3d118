// Package inherit keeps the listening sockets of a node's services open
// while the processes that serve them come and go, as socket activation
// does: machined opens a service's socket, gives the service a copy as an
// inherited descriptor at each start, and keeps its own, which it never
// accepts on. While no process serves the socket the kernel goes on
// completing TCP handshakes into its backlog, so a client's connection
// waits for the next process instead of being refused.
//
// It waits a moment, not for ever: a socket no process has had for HoldFor
// (a service in a crash loop's backoff, one that waits before it starts)
// refuses its connections, as a closed port would, until a process is
// given it again; a client then fails over instead of waiting out its
// deadline. A restart or a switch of version takes well under HoldFor.
//
// Across an exec (machined switching to another installed version) the
// held sockets survive too: PassOn clears close-on-exec on them and names
// them in EnvListeners, and the new machined adopts them with Adopt. A
// machined started any other way binds anew.
package inherit

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// EnvListeners names the environment variable by which a machined tells
// the machined it executes which inherited descriptor holds which
// listening address: FD=ADDR entries separated by spaces, such as
// "3=127.0.0.2:50000 4=127.0.0.2:50001".
const EnvListeners = "AEGIS_LISTENERS"

// FirstFD is the descriptor a process's first inherited file gets
// (exec.Cmd.ExtraFiles starts after stdin, stdout and stderr).
const FirstFD = 3

// DefaultHoldFor is how long a held socket no process has keeps its
// clients waiting before it refuses them: a service restarted or switched
// to another version serves it again within a second or so.
const DefaultHoldFor = 2 * time.Second

// Set holds listening TCP sockets by the address they were opened for.
// Its methods may be called concurrently. The zero Set holds nothing and
// is ready to use.
type Set struct {
	// HoldFor is how long a socket no process has keeps clients waiting
	// before it refuses them; zero means DefaultHoldFor.
	HoldFor time.Duration

	mu   sync.Mutex
	held map[string]*socket
	// passed is set by PassOn: the sockets belong to the next process,
	// and nothing here refuses on them any more.
	passed bool
}

// Listen returns the socket held for addr, opening it on first use.
func (s *Set) Listen(addr string) (*net.TCPListener, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	sock, err := s.listenLocked(addr)
	if err != nil {
		return nil, err
	}

	return sock.l, nil
}

func (s *Set) listenLocked(addr string) (*socket, error) {
	if sock, ok := s.held[addr]; ok {
		return sock, nil
	}

	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("inherit: %w", err)
	}

	if s.held == nil {
		s.held = map[string]*socket{}
	}

	s.held[addr] = &socket{l: l.(*net.TCPListener)} //nolint:forcetypeassert // net.Listen("tcp") gives one

	return s.held[addr], nil
}

// Source is what gives a process the socket of addr at each start: its
// File is a new copy of the held socket (opened then, if need be), which
// the caller closes once the process has it, and Release says that the
// process has ended.
func (s *Set) Source(addr string) Source { return Source{set: s, addr: addr} }

// Source gives copies of one held socket; see Set.Source.
type Source struct {
	set  *Set
	addr string
}

// File opens (or takes) the socket and returns a copy of it for a
// process, which has it until Release: the socket stops refusing
// clients, if it was.
func (src Source) File() (*os.File, error) {
	s := src.set

	s.mu.Lock()
	defer s.mu.Unlock()

	sock, err := s.listenLocked(src.addr)
	if err != nil {
		return nil, err
	}

	sock.users++
	sock.stopRefusing()

	f, err := sock.l.File()
	if err != nil {
		sock.users--
		s.idleLocked(src.addr, sock)

		return nil, fmt.Errorf("inherit: copying the socket of %s: %w", src.addr, err)
	}

	return f, nil
}

// Release says that a process File gave the socket to has ended: once no
// process has it for HoldFor, the socket refuses clients.
func (src Source) Release() {
	s := src.set

	s.mu.Lock()
	defer s.mu.Unlock()

	sock, ok := s.held[src.addr]
	if !ok {
		return
	}

	sock.users = max(sock.users-1, 0)
	s.idleLocked(src.addr, sock)
}

// Addrs are the addresses of the held sockets, sorted.
func (s *Set) Addrs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()

	addrs := make([]string, 0, len(s.held))
	for a := range s.held {
		addrs = append(addrs, a)
	}

	slices.Sort(addrs)

	return addrs
}

// Retain closes every held socket whose address is not one of addrs: an
// adopted socket the node's config no longer names.
func (s *Set) Retain(addrs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()

	for a, sock := range s.held {
		if !slices.Contains(addrs, a) {
			sock.stopRefusing()
			sock.l.Close() //nolint:errcheck // nothing accepts on it
			delete(s.held, a)
		}
	}
}

// Close closes every held socket: clients are refused from then on.
func (s *Set) Close() {
	s.Retain()
}

// PassOn readies the held sockets for the process that replaces this one
// by an exec: it clears close-on-exec on each and returns the value of
// EnvListeners that names them, empty when none is held. Call it just
// before the exec, with no child started in between: a child would
// inherit them too.
func (s *Set) PassOn() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	s.passed = true
	entries := make([]string, 0, len(s.held))

	for addr, sock := range s.held {
		sock.stopRefusing()

		fd, err := keepOnExec(sock.l)
		if err != nil {
			return "", fmt.Errorf("inherit: passing on the socket of %s: %w", addr, err)
		}

		entries = append(entries, strconv.Itoa(fd)+"="+addr)
	}

	slices.Sort(entries)

	return strings.Join(entries, " "), nil
}

// keepOnExec clears close-on-exec on l's descriptor and returns it. It
// goes through SyscallConn, which, unlike os.File.Fd, leaves the socket
// non-blocking for the process that serves it.
func keepOnExec(l *net.TCPListener) (int, error) {
	rc, err := l.SyscallConn()
	if err != nil {
		return 0, err
	}

	fd, ferr := -1, error(nil)
	if err := rc.Control(func(d uintptr) {
		fd = int(d)
		_, ferr = unix.FcntlInt(d, unix.F_SETFD, 0)
	}); err != nil {
		return 0, err
	}

	return fd, ferr
}

// Entry is one socket an EnvListeners value names.
type Entry struct {
	FD   int
	Addr string
}

// ErrBadValue marks an EnvListeners value that cannot be read.
var ErrBadValue = errors.New("inherit: bad " + EnvListeners)

// Parse reads an EnvListeners value. Each descriptor is above stderr and
// named once, each address is HOST:PORT and named once.
func Parse(value string) ([]Entry, error) {
	var entries []Entry

	for _, field := range strings.Fields(value) {
		fdText, addr, ok := strings.Cut(field, "=")
		fd, err := strconv.Atoi(fdText)

		switch {
		case !ok || err != nil:
			return nil, fmt.Errorf("%w: %q is not FD=ADDR", ErrBadValue, field)
		case fd < FirstFD:
			return nil, fmt.Errorf("%w: %q: descriptor %d is not an inherited one (at least %d)", ErrBadValue, field, fd, FirstFD)
		case slices.ContainsFunc(entries, func(e Entry) bool { return e.FD == fd || e.Addr == addr }):
			return nil, fmt.Errorf("%w: %q: descriptor or address named twice", ErrBadValue, field)
		}

		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("%w: %q: %w", ErrBadValue, field, err)
		}

		entries = append(entries, Entry{FD: fd, Addr: addr})
	}

	return entries, nil
}
