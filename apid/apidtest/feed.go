package apidtest

import (
	"context"
	"fmt"
	"sync"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/protobuf/types/known/anypb"
)

// feed holds the backend's service logs and events, and wakes followers
// when either grows.
type feed struct {
	hostname string

	mu        sync.Mutex
	logs      map[string][]string
	events    []*machine.Event
	followers map[followKind]int // calls waiting for more, by kind
	changed   chan struct{}      // closed and replaced on every change
}

// InitialLogLines is how many lines each service's log starts with.
const InitialLogLines = 5

// Services are the services the backend knows.
func Services() []string { return []string{"apid", "trustd", "timed"} }

func newFeed(hostname string) *feed {
	f := &feed{hostname: hostname, logs: map[string][]string{}, followers: map[followKind]int{}, changed: make(chan struct{})}

	for _, svc := range Services() {
		for i := 1; i <= InitialLogLines; i++ {
			f.logs[svc] = append(f.logs[svc], fmt.Sprintf("%s %s line %d", hostname, svc, i))
		}

		f.publishLocked(svc, machine.ServiceStateEvent_RUNNING, "started")
	}

	return f
}

func (f *feed) meta() *common.Metadata { return &common.Metadata{Hostname: f.hostname} }

func (f *feed) appendLog(service, line string) {
	f.mu.Lock()
	defer f.mu.Unlock()

	f.logs[service] = append(f.logs[service], line)
	f.notifyLocked()
}

func (f *feed) publish(service string, action machine.ServiceStateEvent_Action, msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()

	f.publishLocked(service, action, msg)
}

func (f *feed) publishLocked(service string, action machine.ServiceStateEvent_Action, msg string) {
	data, err := anypb.New(&machine.ServiceStateEvent{Service: service, Action: action, Message: msg})
	if err != nil {
		panic(err) // a fixed, valid message always marshals
	}

	f.events = append(f.events, &machine.Event{
		Metadata: f.meta(),
		Data:     data,
		Id:       fmt.Sprintf("%s-%06d", f.hostname, len(f.events)+1),
		ActorId:  service,
	})
	f.notifyLocked()
}

// followKind tells Logs followers from Events followers.
type followKind int

const (
	followLogs followKind = iota
	followEvents
)

// follow counts a follower of kind in (+1) or out (-1).
func (f *feed) follow(kind followKind, delta int) {
	f.mu.Lock()
	defer f.mu.Unlock()

	f.followers[kind] += delta
	f.notifyLocked()
}

// waitFollowers blocks until exactly n followers of kind are waiting, or
// ctx ends.
func (f *feed) waitFollowers(ctx context.Context, kind followKind, n int) error {
	for {
		f.mu.Lock()
		count, changed := f.followers[kind], f.changed
		f.mu.Unlock()

		if count == n {
			return nil
		}

		if err := wait(ctx, changed); err != nil {
			return err
		}
	}
}

func (f *feed) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// logsFrom returns the log lines of service from index from, the index to
// continue at, and a channel closed at the next change.
func (f *feed) logsFrom(service string, from int) ([]string, int, <-chan struct{}, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()

	lines, ok := f.logs[service]
	if from < 0 {
		from = 0
	}

	return append([]string(nil), lines[min(from, len(lines)):]...), len(lines), f.changed, ok
}

// eventsFrom is logsFrom for events.
func (f *feed) eventsFrom(from int) ([]*machine.Event, int, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()

	if from < 0 {
		from = 0
	}

	return append([]*machine.Event(nil), f.events[min(from, len(f.events)):]...), len(f.events), f.changed
}

// tailStart is where a tail of n entries out of total starts: n < 0 means
// everything, as in the Talos API.
func tailStart(n int32, total int) int {
	if n < 0 {
		return 0
	}

	return max(total-int(n), 0)
}

// wait blocks until changed is closed or ctx ends.
func wait(ctx context.Context, changed <-chan struct{}) error {
	select {
	case <-changed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
