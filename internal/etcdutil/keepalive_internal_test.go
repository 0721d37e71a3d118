package etcdutil

import (
	"context"
	"errors"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// slowStream is a keep-alive stream whose member answers each keep-alive
// after delay, in order; with a negative delay it never answers.
type slowStream struct {
	grpc.ClientStream
	ctx   context.Context
	delay time.Duration
	sent  chan int64
}

func (s *slowStream) Send(r *pb.LeaseKeepAliveRequest) error {
	s.sent <- r.GetID()

	return nil
}

func (s *slowStream) Recv() (*pb.LeaseKeepAliveResponse, error) {
	select {
	case id := <-s.sent:
		if s.delay < 0 {
			<-s.ctx.Done()

			return nil, s.ctx.Err()
		}

		select {
		case <-time.After(s.delay):
			return &pb.LeaseKeepAliveResponse{ID: id, TTL: 30}, nil
		case <-s.ctx.Done():
			return nil, s.ctx.Err()
		}
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

func startSlow(t *testing.T, delay time.Duration) *keepAlives {
	t.Helper()

	ctx, cancel := context.WithCancel(context.Background())
	k := startKeepAlives(ctx, cancel, &slowStream{ctx: ctx, delay: delay, sent: make(chan int64, 16)})
	t.Cleanup(k.close)

	return k
}

// TestBusyStreamIsWaitedFor: a stream that answers, however far behind,
// keeps its callers until their own deadline; one that answers nothing
// for stalledAfter ends, and every caller waiting on it learns so.
func TestBusyStreamIsWaitedFor(t *testing.T) {
	t.Run("busy", func(t *testing.T) {
		// Three keep-alives answered one after another, each after three
		// quarters of stalledAfter: the last waits more than twice
		// stalledAfter in all, and the stream is never stalled.
		k := startSlow(t, stalledAfter*3/4)
		errs := make(chan error, 3)

		for id := range 3 {
			go func() {
				_, err := k.renew(context.Background(), clientv3.LeaseID(id+1))
				errs <- err
			}()
		}

		for range 3 {
			if err := <-errs; err != nil {
				t.Fatalf("a keep-alive on a busy stream: %v", err)
			}
		}
	})

	t.Run("stalled", func(t *testing.T) {
		k := startSlow(t, -1)
		start := time.Now()

		_, err := k.renew(context.Background(), clientv3.LeaseID(1))
		if !errors.Is(err, errStalled) {
			t.Fatalf("a keep-alive on a stream that answers nothing: %v, want errStalled", err)
		}

		if waited := time.Since(start); waited < stalledAfter {
			t.Fatalf("the stream was taken for stalled after %v, before stalledAfter", waited)
		}

		if _, err := k.renew(context.Background(), clientv3.LeaseID(2)); !errors.Is(err, errStalled) {
			t.Fatalf("a keep-alive on the stalled stream: %v, want its error at once", err)
		}
	})
}

// TestStreamNotOpenedInTime: callers waiting for a keep-alive stream that
// does not open (its member's connection being made again) give up after
// stalledAfter, and go elsewhere.
func TestStreamNotOpenedInTime(t *testing.T) {
	const endpoint = "https://10.0.0.1:2379"

	l := NewLeader(nil, nil, nil)
	l.streams[endpoint] = &keepAliveStreams{opening: &opening{done: make(chan struct{})}}

	start := time.Now()

	if _, err := l.keepAlivesOf(context.Background(), endpoint, nil); !errors.Is(err, errNotOpened) {
		t.Fatalf("waiting for a stream that does not open: %v, want errNotOpened", err)
	}

	if waited := time.Since(start); waited < stalledAfter {
		t.Fatalf("gave up after %v, before stalledAfter", waited)
	}
}
