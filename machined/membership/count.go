package membership

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// entryCount is the count of the member list that admit goes by: one read
// of etcd, and the new entries this Store admitted since.
type entryCount struct {
	read     time.Time
	n        int64
	admitted int64
}

// admit refuses m's entry when it would be a new one in a full list: a
// reader then sees every member or refuses, never a part. An entry already
// there is always refreshed. The count is not part of the write's
// transaction, and may be CountFresh old (plus the entries this Store
// admitted since, and minus none that left), so new entries written
// meanwhile, by this control plane and the others, may pass the bound by
// as many as they write in that time (a join storm: some 50 a second in
// all); readers allow twice the bound. Counting afresh for every new entry
// cost etcd a walk of every key: a storm of 10,000 workers asked for
// 10,000 counts of up to 10,000 keys, which took 100–300 ms each past
// 6,000 members, and the keep-alives waiting behind them let thousands of
// entries' leases expire.
func (s *Store) admit(ctx context.Context, c *claim) error {
	if c.entry.rev != 0 {
		return nil
	}

	s.countMu.Lock()
	defer s.countMu.Unlock()

	now := s.clock.Now()
	if s.count.read.IsZero() || now.Sub(s.count.read) >= CountFresh {
		resp, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}

		s.count = entryCount{read: now, n: resp.Count}
	}

	if n := s.count.n + s.count.admitted; n >= int64(s.max) {
		return fmt.Errorf("%w: the member list holds %d entries, its bound", ErrFull, n)
	}

	s.count.admitted++

	return nil
}
