package etcdutil

import (
	"context"
	"errors"
	"fmt"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// maxQueuedKeepAlives bounds the keep-alives waiting to be sent on one
// stream. A stream that far behind is stuck, not busy: a keep-alive that
// finds the queue full is refused at once, and goes through the cluster's
// client instead.
const maxQueuedKeepAlives = 4096

// errKeepAlivesClosed ends the keep-alives of a member Leader no longer
// sends to.
var errKeepAlivesClosed = errors.New("etcdutil: keep-alive stream closed")

// keepAlives sends the keep-alives of many leases over one LeaseKeepAlive
// stream to one member (a Leader keeps a few: streams.go). clientv3's KeepAliveOnce opens a stream per call:
// under the heartbeats of thousands of nodes, the opening and closing of
// those streams cost the leader and the caller more than the renewals. A
// member answers the keep-alives of one stream one at a time, in the
// order they came, one answer each, or ends the stream: so the answers
// are matched to their callers in order, and each answer's lease ID is
// checked against its caller's.
//
// clientv3's own KeepAlive shares a stream too, but renews each lease on
// its own timer for as long as asked: a lease kept alive here must be
// renewed by each heartbeat and by nothing else, so that it ends when the
// heartbeats do.
type keepAlives struct {
	cancel context.CancelFunc
	// queue holds the IDs to send, in the order of waiting.
	queue chan int64

	mu      sync.Mutex
	waiting []keepAliveWait
	err     error
}

// keepAliveWait is a caller waiting for the answer to its keep-alive.
type keepAliveWait struct {
	id    int64
	reply chan keepAliveReply
}

type keepAliveReply struct {
	resp *clientv3.LeaseKeepAliveResponse
	err  error
}

// openKeepAlives opens a keep-alive stream to the member c is a client
// of. The stream requires the member to have a leader: one that loses it
// ends the stream, and its callers go elsewhere, rather than wait.
func openKeepAlives(c *clientv3.Client) (*keepAlives, error) {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(context.Background()))

	stream, err := pb.NewLeaseClient(c.ActiveConnection()).LeaseKeepAlive(ctx, grpc.WaitForReady(false))
	if err != nil {
		cancel()

		return nil, fmt.Errorf("etcdutil: opening a keep-alive stream: %w", err)
	}

	k := &keepAlives{cancel: cancel, queue: make(chan int64, maxQueuedKeepAlives)}

	go k.send(ctx, stream)
	go k.receive(stream)

	return k, nil
}

// renew sends a keep-alive of lease id and waits for its answer, or for
// ctx. A lease that is gone is rpctypes.ErrLeaseNotFound, as from
// clientv3's KeepAliveOnce. Any other error means the stream ended and
// renews nothing more.
func (k *keepAlives) renew(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	reply := make(chan keepAliveReply, 1)

	if err := k.enqueue(keepAliveWait{id: int64(id), reply: reply}); err != nil {
		return nil, err
	}

	select {
	case r := <-reply:
		return r.resp, r.err
	case <-ctx.Done():
		// The answer, when it comes, goes to the buffered reply and is
		// dropped: the order of the others is kept.
		return nil, ctx.Err()
	}
}

// enqueue queues w's keep-alive and its wait together, so that the
// answers come in the order of the waits.
func (k *keepAlives) enqueue(w keepAliveWait) error {
	k.mu.Lock()
	defer k.mu.Unlock()

	if k.err != nil {
		return k.err
	}

	select {
	case k.queue <- w.id:
	default:
		return errors.New("etcdutil: keep-alive stream backed up")
	}

	k.waiting = append(k.waiting, w)

	return nil
}

// inFlight is how many keep-alives wait for their answer on the stream;
// ok is false once the stream ended.
func (k *keepAlives) inFlight() (int, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()

	return len(k.waiting), k.err == nil
}

// close ends the stream; its callers still waiting get an error.
func (k *keepAlives) close() { k.fail(errKeepAlivesClosed) }

// send sends the queued keep-alives until the stream ends.
func (k *keepAlives) send(ctx context.Context, stream pb.Lease_LeaseKeepAliveClient) {
	for {
		select {
		case id := <-k.queue:
			if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: id}); err != nil {
				k.fail(fmt.Errorf("etcdutil: sending a keep-alive: %w", err))

				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// receive hands each answer to the caller first in line, until the
// stream ends.
func (k *keepAlives) receive(stream pb.Lease_LeaseKeepAliveClient) {
	for {
		resp, err := stream.Recv()
		if err != nil {
			k.fail(fmt.Errorf("etcdutil: keep-alive stream: %w", err))

			return
		}

		if err := k.answer(resp); err != nil {
			k.fail(err)

			return
		}
	}
}

// answer gives resp to the caller first in line. An answer for another
// lease, or for no caller, means the order is lost: the stream is ended
// rather than an answer given to the wrong caller.
func (k *keepAlives) answer(resp *pb.LeaseKeepAliveResponse) error {
	k.mu.Lock()
	defer k.mu.Unlock()

	if len(k.waiting) == 0 || k.waiting[0].id != resp.GetID() {
		return fmt.Errorf("etcdutil: keep-alive answer for lease %x out of order", resp.GetID())
	}

	w := k.waiting[0]
	k.waiting[0] = keepAliveWait{}
	k.waiting = k.waiting[1:]

	if resp.GetTTL() <= 0 {
		w.reply <- keepAliveReply{err: rpctypes.ErrLeaseNotFound}

		return nil
	}

	w.reply <- keepAliveReply{resp: &clientv3.LeaseKeepAliveResponse{
		ResponseHeader: resp.GetHeader(), ID: clientv3.LeaseID(resp.GetID()), TTL: resp.GetTTL(),
	}}

	return nil
}

// fail ends the stream with err, once, and gives err to every caller
// still waiting.
func (k *keepAlives) fail(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()

	if k.err != nil {
		return
	}

	k.err = err
	k.cancel()

	for _, w := range k.waiting {
		w.reply <- keepAliveReply{err: err}
	}

	k.waiting = nil
}
