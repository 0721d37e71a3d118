package resources

import (
	"maps"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/api/node"
)

// Members is the cluster's member list as machined hands it to apid and
// trustd, by address: each watcher is sent the list once, then only the members that
// came, changed or left. With thousands of members, sending the whole list
// at each change, and apid indexing it again, cost a control plane more
// CPU than everything else its members do. It is safe for concurrent use.
type Members struct {
	mu     sync.Mutex
	byAddr map[string]*node.MemberName
	// seq counts the changes applied; log holds the last of them, log[i]
	// being change seq-len(log)+1+i.
	seq     uint64
	log     []memberChange
	changed chan struct{}
}

// memberChange is one member set (name) or gone (name nil).
type memberChange struct {
	addr string
	name *node.MemberName
}

// MembersLog is how many changes Members keeps for watchers that are
// behind; one further behind is sent the whole list again, which by then
// costs no more than the changes would.
const MembersLog = 4096

// NewMembers returns an empty member list.
func NewMembers() *Members {
	return &Members{byAddr: map[string]*node.MemberName{}, changed: make(chan struct{})}
}

// Apply sets the members of set, by address, and removes those of
// removed, then wakes the watchers if anything changed. The entries must
// not be changed afterwards.
func (m *Members) Apply(set []*node.MemberName, removed []string) {
	m.mu.Lock()
	defer m.mu.Unlock()

	before := m.seq

	for _, name := range set {
		m.byAddr[name.GetAddress()] = name
		m.record(memberChange{addr: name.GetAddress(), name: name})
	}

	for _, addr := range removed {
		if _, ok := m.byAddr[addr]; ok {
			delete(m.byAddr, addr)
			m.record(memberChange{addr: addr})
		}
	}

	if m.seq == before {
		return
	}

	close(m.changed)
	m.changed = make(chan struct{})
}

func (m *Members) record(c memberChange) {
	m.seq++

	if len(m.log) >= 2*MembersLog {
		m.log = slices.Delete(m.log, 0, len(m.log)-MembersLog+1)
	}

	m.log = append(m.log, c)
}

// List is every member, sorted by address.
func (m *Members) List() []*node.MemberName {
	m.mu.Lock()
	defer m.mu.Unlock()

	return m.list()
}

func (m *Members) list() []*node.MemberName {
	out := make([]*node.MemberName, 0, len(m.byAddr))
	for _, addr := range slices.Sorted(maps.Keys(m.byAddr)) {
		out = append(out, m.byAddr[addr])
	}

	return out
}

// since is what changed after change seq: the members as they are now,
// each once; the whole list (Full) when the log no longer reaches back
// to seq. It returns the sequence number it reaches and a channel closed
// at the next change.
func (m *Members) since(seq uint64) (*node.MemberChanges, uint64, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()

	if seq == m.seq {
		return nil, seq, m.changed
	}

	first := m.seq - uint64(len(m.log)) // the change before log[0]
	if seq < first || seq > m.seq {
		return &node.MemberChanges{Full: true, Set: m.list()}, m.seq, m.changed
	}

	out := &node.MemberChanges{}
	seen := map[string]bool{}

	for _, c := range m.log[seq-first:] {
		if seen[c.addr] {
			continue
		}

		seen[c.addr] = true

		if name, ok := m.byAddr[c.addr]; ok {
			out.Set = append(out.Set, name)
		} else {
			out.Removed = append(out.Removed, c.addr)
		}
	}

	return out, m.seq, m.changed
}

// snapshot is the whole list as one full message, with its sequence number and a
// channel closed at the next change.
func (m *Members) snapshot() (*node.MemberChanges, uint64, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()

	return &node.MemberChanges{Full: true, Set: m.list()}, m.seq, m.changed
}

// watch sends the list, then the changes, until the stream ends.
func (m *Members) watch(stream grpc.ServerStreamingServer[node.MemberChanges]) error {
	msg, seq, changed := m.snapshot()

	for {
		if msg != nil {
			if err := stream.Send(msg); err != nil {
				return err
			}
		}

		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		}

		msg, seq, changed = m.since(seq)
	}
}

// WatchMembers sends the member list, then its changes, when the socket
// serves it (apid's and trustd's); a server without a list refuses it.
func (s *Server) WatchMembers(_ *node.WatchRequest, stream grpc.ServerStreamingServer[node.MemberChanges]) error {
	if s.members == nil {
		return status.Error(codes.PermissionDenied, "the member list is not available on this socket")
	}

	return s.members.watch(stream)
}
