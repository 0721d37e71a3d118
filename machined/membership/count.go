package membership

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// entryCount is what admit goes by: the count of the list that began at
// read (sharedRead), and the new entries this Store admitted since.
type entryCount struct {
	read     time.Time
	admitted int64
}

// admit refuses m's entry when it would be a new one in a full list: a
// reader then sees every member or refuses, never a part. An entry already
// there is always refreshed. The count is not part of the write's
// transaction, and may be CountFresh old (plus the entries this Store
// admitted since, and minus none that left), so new entries written
// meanwhile, by this control plane and the others, may pass the bound by
// as many as they write in that time (a join storm: some 50 a second in
// all), and so may those this Store admits while a count is read (the
// count may miss them, and the entries admitted are counted from the read
// on); readers allow twice the bound. Counting afresh for every new entry
// cost etcd a walk of every key: a storm of 10,000 workers asked for
// 10,000 counts of up to 10,000 keys, which took 100–300 ms each past
// 6,000 members, and the keep-alives waiting behind them let thousands of
// entries' leases expire.
func (s *Store) admit(ctx context.Context, c *claim) error {
	if c.entry.rev != 0 {
		return nil
	}

	n, read, err := s.counted.get(ctx)
	if err != nil {
		return err
	}

	s.countMu.Lock()
	defer s.countMu.Unlock()

	if !s.count.read.Equal(read) {
		s.count = entryCount{read: read}
	}

	if n += s.count.admitted; n >= int64(s.max) {
		return fmt.Errorf("%w: the member list holds %d entries, its bound", ErrFull, n)
	}

	s.count.admitted++

	return nil
}

// readCount counts the entries, keys only.
func (s *Store) readCount(ctx context.Context) (int64, error) {
	resp, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("%w: counting the entries: %w", ErrUnavailable, err)
	}

	return resp.Count, nil
}
