package etcdutil

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Bounds of the keep-alive streams to one member.
const (
	// keepAlivesPerStream is how many keep-alives may be in flight on one
	// stream before the next one opens another. A member answers the
	// keep-alives of a stream one at a time, and the leader makes each
	// wait until it has applied every write already committed (and, when
	// it has not ticked lately, until a quorum confirms it still leads:
	// etcd's LeaseRenew). So one stream renews at most a lease per apply
	// round trip, which a burst of writes (a join storm's) stretches,
	// while the heartbeats of 5,000 nodes need some 170 renewals a second
	// from each of three trustd. Keep-alives on streams of their own wait
	// for the same apply together.
	keepAlivesPerStream = 8
	// maxKeepAliveStreams bounds the streams open to one member: each is
	// an HTTP/2 stream and two goroutines here, and a goroutine at the
	// member. At 8 in flight each, 128 keep-alives wait for the leader at
	// once before a caller queues behind another.
	maxKeepAliveStreams = 16
)

// keepAliveStreams are the keep-alive streams open to one member, and the
// one being opened. A keep-alive goes to the open stream with the fewest
// in flight; one more opens when each has keepAlivesPerStream or more.
// Under a settled load one stream carries them all.
type keepAliveStreams struct {
	open    []*keepAlives
	opening *opening
}

// opening is a keep-alive stream being opened: the callers who find no
// stream open wait for done (or their own ctx) rather than open one each.
type opening struct {
	done chan struct{}
	k    *keepAlives
	err  error
}

// pick returns the stream with the fewest keep-alives in flight, nil when
// none is open, and whether another stream should be opened; it drops
// the streams that ended. l.mu is held.
func (s *keepAliveStreams) pick() (*keepAlives, bool) {
	live := s.open[:0]
	inFlight := make([]int, 0, len(s.open))

	for _, k := range s.open {
		if n, ok := k.inFlight(); ok {
			live = append(live, k)
			inFlight = append(inFlight, n)
		}
	}

	clear(s.open[len(live):])
	s.open = live

	i, more := leastBusy(inFlight)
	if i < 0 {
		return nil, more
	}

	return live[i], more
}

// leastBusy returns the index of the smallest of inFlight (-1 for none),
// and whether another stream should be opened: none is open, or every
// one has keepAlivesPerStream in flight and fewer than
// maxKeepAliveStreams are.
func leastBusy(inFlight []int) (int, bool) {
	best := -1

	for i, n := range inFlight {
		if best < 0 || n < inFlight[best] {
			best = i
		}
	}

	if best < 0 {
		return -1, true
	}

	return best, inFlight[best] >= keepAlivesPerStream && len(inFlight) < maxKeepAliveStreams
}

// close closes every open stream; their callers still waiting get an
// error.
func (s *keepAliveStreams) close() {
	for _, k := range s.open {
		k.close()
	}

	s.open = nil
}

// renewAt renews lease id over a keep-alive stream to endpoint, whose
// client is c.
func (l *Leader) renewAt(ctx context.Context, endpoint string, c *clientv3.Client, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	k, err := l.keepAlivesOf(ctx, endpoint, c)
	if err != nil {
		return nil, err
	}

	return k.renew(ctx, id)
}

// keepAlivesOf returns the least busy keep-alive stream open to endpoint,
// and opens another in the background when each is busy. When none is
// open, it opens one, once for all the callers that find none, and waits
// for it.
func (l *Leader) keepAlivesOf(ctx context.Context, endpoint string, c *clientv3.Client) (*keepAlives, error) {
	l.mu.Lock()

	s := l.streams[endpoint]
	if s == nil {
		s = &keepAliveStreams{}
		l.streams[endpoint] = s
	}

	k, more := s.pick()
	if more && s.opening == nil {
		s.opening = &opening{done: make(chan struct{})}

		go l.open(endpoint, c, s.opening)
	}

	o := s.opening

	l.mu.Unlock()

	if k != nil {
		return k, nil
	}

	select {
	case <-o.done:
		return o.k, o.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// open opens the keep-alive stream o waits for, outside l.mu: opening
// waits for the connection. The stream joins those open to endpoint, even
// when they were dropped meanwhile: a failed stream says nothing of a new
// one to the same client.
func (l *Leader) open(endpoint string, c *clientv3.Client, o *opening) {
	k, err := openKeepAlives(c)

	l.mu.Lock()
	defer l.mu.Unlock()

	s := l.streams[endpoint]
	if s != nil && s.opening == o {
		s.opening = nil
	}

	if err == nil && (l.closed || l.clients[endpoint] != c) {
		k.close()
		k, err = nil, errKeepAlivesClosed
	}

	if err == nil {
		if s == nil {
			s = &keepAliveStreams{}
			l.streams[endpoint] = s
		}

		s.open = append(s.open, k)
	}

	o.k, o.err = k, err
	close(o.done)
}

// dropStream closes the keep-alive streams to endpoint; l.mu is held. A
// stream being opened is not stopped: it joins a new set (open).
func (l *Leader) dropStream(endpoint string) {
	if s := l.streams[endpoint]; s != nil {
		s.close()
		delete(l.streams, endpoint)
	}
}
