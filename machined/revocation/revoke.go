package revocation

import (
	"context"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Covered is the record of one certificate a revocation covers.
type Covered struct {
	// Entry is the record etcd holds: the first one when the certificate
	// was already revoked.
	Entry
	// Existed says the certificate was already revoked.
	Existed bool
}

// Revocation is what Revoke recorded.
type Revocation struct {
	// Covered is the certificate asked for.
	Covered
	// Descendants are the live certificates renewed from it, directly or
	// not, sorted by serial: the revocation covers them too.
	Descendants []Covered
}

// Revoke records e, and an entry for every live certificate renewed from
// e's, however indirectly (never its ancestors or siblings), dated and
// attributed like e. A serial already revoked keeps its first record. A
// full list is pruned of expired entries before the revocation is refused
// with ErrFull. An expired certificate is refused by its expiry already:
// its revocation records only what was renewed from it, and is refused
// with ErrBadEntry when none of that is live.
//
// A renewal recorded while the revocation runs is either seen or refused:
// the entries are written, then a last transaction checks that no link was
// recorded since the lineage was read; when one was, the lineage is read
// again. A renewal recorded after that finds its parent revoked (Record).
func (s *Store) Revoke(ctx context.Context, e Entry) (Revocation, error) {
	if err := e.check(); err != nil {
		return Revocation{}, err
	}

	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()

	// Every attempt that fails saw a new certificate in the family, which
	// MaxLineage bounds: the loop ends even against a thief renewing as
	// fast as it can.
	for range s.cfg.MaxLineage + maxAttempts {
		lin, rev, err := s.readLineage(ctx)
		if err != nil {
			return Revocation{}, err
		}

		now := s.cfg.Clock.Now()

		var wanted []Entry
		if !e.Expired(now) {
			wanted = append(wanted, e)
		}

		for _, l := range lin.descendants(e.Serial, now) {
			wanted = append(wanted, Entry{Serial: l.Child, NotAfter: l.NotAfter, RevokedAt: e.RevokedAt, RevokedBy: e.RevokedBy,
				Reason: e.Reason})
		}

		if len(wanted) == 0 {
			return Revocation{}, fmt.Errorf("%w: serial %s: the certificate expired at %s and is refused anyway, and nothing renewed from it is live",
				ErrBadEntry, e.Serial, e.NotAfter.UTC().Format(time.RFC3339))
		}

		recs, done, err := s.revokeAll(ctx, wanted, s.unchanged(lin, e.Serial, rev))
		if err != nil {
			return Revocation{}, err
		}

		switch {
		case !done:
			continue
		case e.Expired(now):
			return Revocation{Covered: Covered{Entry: e}, Descendants: recs}, nil
		default:
			return Revocation{Covered: recs[0], Descendants: recs[1:]}, nil
		}
	}

	return Revocation{}, fmt.Errorf("%w: serial %s: certificates kept being renewed during the revocation", ErrUnavailable, e.Serial)
}

// revokeAll writes the entries of wanted that etcd does not hold, in
// transactions of at most maxTxnPuts, each refusing to overwrite an entry
// written in between (the first record is kept), and returns every entry
// as etcd holds it. done is false when a link was recorded below the
// serial since the lineage was read, or
// an entry appeared in between (unchanged fails): the caller reads the
// lineage again.
func (s *Store) revokeAll(ctx context.Context, wanted []Entry, unchanged []clientv3.Cmp) ([]Covered, bool, error) {
	recs := make([]Covered, len(wanted))

	var missing []int

	for i, w := range wanted {
		resp, err := s.cfg.Client.Get(ctx, s.key(w.Serial))
		if err != nil {
			return nil, false, unavailable(err)
		}

		if len(resp.Kvs) == 0 {
			recs[i], missing = Covered{Entry: w}, append(missing, i)

			continue
		}

		old, err := unmarshalEntry(resp.Kvs[0].Value)
		if err != nil {
			return nil, false, err
		}

		recs[i] = Covered{Entry: old, Existed: true}
	}

	if err := s.room(ctx, len(missing)); err != nil {
		return nil, false, err
	}

	for chunk := range slices.Chunk(missing, maxTxnPuts) {
		var (
			cmps []clientv3.Cmp
			puts []clientv3.Op
		)

		for _, i := range chunk {
			data, err := marshalEntry(recs[i].Entry)
			if err != nil {
				return nil, false, err
			}

			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.key(recs[i].Serial)), "=", 0))
			puts = append(puts, clientv3.OpPut(s.key(recs[i].Serial), string(data)))
		}

		resp, err := s.cfg.Client.Txn(ctx).If(cmps...).Then(puts...).Commit()
		if err != nil {
			return nil, false, unavailable(err)
		}

		if !resp.Succeeded {
			return nil, false, nil
		}
	}

	// Every entry is written: a link recorded below the serial since the
	// lineage was read is one the revocation may have missed.
	resp, err := s.cfg.Client.Txn(ctx).If(unchanged...).Commit()
	if err != nil {
		return nil, false, unavailable(err)
	}

	return recs, resp.Succeeded, nil
}
