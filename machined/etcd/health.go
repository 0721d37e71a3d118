package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// MemberHealth is what one etcd member says of itself.
type MemberHealth struct {
	ID      uint64
	Name    string
	Learner bool
	// Leader is the member this one follows; zero when it knows none.
	Leader uint64
	// Err says why the member did not answer, or the errors it reports.
	Err error
}

// Health lists the cluster's members through any control plane's member
// (the local one may be the one that is down) and asks each for its
// status, all at once.
func (e *Etcd) Health(ctx context.Context) ([]MemberHealth, error) {
	cli, err := e.Client()
	if err != nil {
		return nil, err
	}

	lctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()

	list, err := cli.MemberList(lctx)
	if err != nil {
		return nil, fmt.Errorf("etcd: no member answers: %w", err)
	}

	out := make([]MemberHealth, len(list.Members))

	var wg sync.WaitGroup

	for i, m := range list.Members {
		out[i] = MemberHealth{ID: m.ID, Name: m.Name, Learner: m.IsLearner}

		if len(m.ClientURLs) == 0 {
			out[i].Err = fmt.Errorf("etcd: member %s has not started", m.Name)

			continue
		}

		wg.Go(func() { out[i].Leader, out[i].Err = e.memberStatus(ctx, m.ClientURLs[0]) })
	}

	wg.Wait()

	return out, nil
}

func (e *Etcd) memberStatus(ctx context.Context, url string) (uint64, error) {
	var leader uint64

	err := e.withEndpoints(ctx, []string{url}, func(ctx context.Context, cli *clientv3.Client) error {
		sctx, cancel := context.WithTimeout(ctx, dialTimeout)
		defer cancel()

		st, err := cli.Status(sctx, url)
		if err != nil {
			return err
		}

		if len(st.Errors) > 0 {
			return fmt.Errorf("etcd: %v", st.Errors)
		}

		leader = st.Leader

		return nil
	})
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		err = fmt.Errorf("not answering at %s: no reply within %s", url, dialTimeout)
	case err != nil && !strings.HasPrefix(err.Error(), "etcd: "):
		err = fmt.Errorf("not answering at %s: %w", url, err)
	}

	return leader, err
}
