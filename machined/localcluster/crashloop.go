package localcluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// crashLoopExits is how many exits of one service in a row, without it
// coming up in between, make a wait give up on a cluster: its restart
// delays grow from a second (1 s, 2 s, …), so the third exit comes within a
// few seconds of the first, where a service that can run comes up at its
// first or second try.
const crashLoopExits = 3

// crashLoopError is a service of a node that keeps exiting while the
// cluster comes up.
type crashLoopError struct {
	node, service, last, tail string
	exits                     int
}

func (e *crashLoopError) Error() string {
	return fmt.Sprintf("localcluster: node %s: service %s exited %d times in a row (last: %s); last lines of its log:\n%s",
		e.node, e.service, e.exits, e.last, e.tail)
}

// serviceExits is what a node's machined log says of one service since it
// last came up: how many times it exited, and the last such state message.
type serviceExits struct {
	count int
	last  string
}

// crashLooping reads n's machined log from offset on and returns the
// error of the first service that exited crashLoopExits times in a row
// without coming up (turning healthy) in between, or nil.
func (c *Cluster) crashLooping(n Node, offset int64) error {
	data, err := os.ReadFile(c.LogPath(n))
	if err != nil || int64(len(data)) < offset {
		return nil
	}

	exits := map[string]*serviceExits{}

	sc := bufio.NewScanner(bytes.NewReader(data[offset:]))
	for sc.Scan() {
		var rec struct {
			Msg, Service, State, Message string
			Healthy                      bool
		}

		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec.Service == "" {
			continue
		}

		e := exits[rec.Service]
		if e == nil {
			e = &serviceExits{}
			exits[rec.Service] = e
		}

		switch {
		case rec.Msg == "service health" && rec.Healthy:
			*e = serviceExits{}
		case rec.Msg == "service state" && strings.Contains(rec.Message, "; restarting in "):
			e.count++
			e.last = rec.Message
		}

		if e.count >= crashLoopExits {
			return &crashLoopError{
				node: n.Name, service: rec.Service, exits: e.count, last: e.last,
				tail: tailFile(rec.Service, filepath.Join(c.StatePath(n), "logs", rec.Service+".log"), tailLines),
			}
		}
	}

	return nil
}

// watchCrashLoops runs wait with a context that ends as soon as a service
// of one of nodes (each read from its offset in the machined log) keeps
// exiting; wait's error is then that service's.
func (c *Cluster) watchCrashLoops(ctx context.Context, nodes []Node, offsets []int64, wait func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)

	var wg sync.WaitGroup
	defer func() { cancel(nil); wg.Wait() }()

	wg.Go(func() {
		for {
			for i, n := range nodes {
				if err := c.crashLooping(n, offsets[i]); err != nil {
					cancel(err)

					return
				}
			}

			select {
			case <-ctx.Done():
				return
			case <-time.After(pollInterval):
			}
		}
	})

	err := wait(ctx)

	var crash *crashLoopError
	if err != nil && errors.As(context.Cause(ctx), &crash) {
		return crash
	}

	return err
}
