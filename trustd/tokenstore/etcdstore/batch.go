package etcdstore

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/aegis-os/aegis/trustd/tokenstore"
)

// Changes (uses and revocations) are committed in batches: while one
// transaction is on its way through the cluster, the changes that arrive
// queue up, and the next transaction carries all of them. Each record in a
// batch is compared on its own revision and written once, with every queued
// change applied to it in turn, so a token used by eight callers at once
// costs one Raft round instead of eight that each lose the race but one.
// Nothing is weakened: the transaction still writes only if no record it
// carries changed since it was read, and a batch that fails its compare is
// split so that a record changed elsewhere does not hold back the others.

// request is one change waiting for its batch.
type request struct {
	ctx  context.Context
	id   string
	fn   func(*tokenstore.Record) error
	done chan outcome // buffered: the batch never blocks on a caller gone
}

// outcome is what a change ended with: the record after it, or why not.
type outcome struct {
	rec tokenstore.Record
	err error
}

func (q *request) finish(rec tokenstore.Record, err error) { q.done <- outcome{rec: rec, err: err} }

// keyBatch is the changes of one record in a batch.
type keyBatch struct {
	id, key string
	// k is the record the changes are applied to and its revision; fresh
	// says it was read in this batch, so a refusal on it needs no compare.
	k     knownRecord
	fresh bool
	reqs  []*request
	// next and outs are what applying reqs to k gave: the record to write
	// (if any change succeeded) and each request's outcome.
	next  tokenstore.Record
	outs  []outcome
	write bool
	// ended: every request has its outcome; nothing more is sent.
	ended bool
}

// change applies fn to the record and writes it back only if nobody changed
// it since it was read, in the next batch. fn may run several times, on the
// record as last seen here and then on the record as it is: its last run is
// on the record the change was counted on, or refused for.
func (s *Store) change(ctx context.Context, id string, fn func(*tokenstore.Record) error) (tokenstore.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()

	req := &request{ctx: ctx, id: id, fn: fn, done: make(chan outcome, 1)}
	if s.enqueue(req) {
		// The batch carries others' changes too: a caller that gives up
		// must not cancel them, so it runs under the store's timeout alone.
		s.runBatch(context.WithoutCancel(ctx))

		if s.pending() {
			go s.drain(context.WithoutCancel(ctx))
		}
	}

	select {
	case o := <-req.done:
		return o.rec, o.err
	case <-ctx.Done():
		// A change already in a transaction may still be counted: a use
		// counted for a caller that got no certificate errs on the safe side.
		return tokenstore.Record{}, unavailable(ctx.Err())
	}
}

// enqueue queues req and reports whether the caller is to run the next
// batch: nobody else is running one.
func (s *Store) enqueue(req *request) bool {
	s.bmu.Lock()
	defer s.bmu.Unlock()

	s.queue = append(s.queue, req)
	if s.running {
		return false
	}

	s.running = true

	return true
}

// pending reports whether changes wait; if none do, nobody runs batches
// from now on, and the next change to arrive starts one.
func (s *Store) pending() bool {
	s.bmu.Lock()
	defer s.bmu.Unlock()

	s.running = len(s.queue) > 0

	return s.running
}

// drain runs batches until the queue is empty. The caller that ran the
// first batch returns to its own caller instead of serving all who came
// after it.
func (s *Store) drain(ctx context.Context) {
	for {
		s.runBatch(ctx)

		if !s.pending() {
			return
		}
	}
}

// take removes the next batch from the queue: the queued changes of up to
// maxBatchRecords records, in the order they came. A change whose caller
// gave up before its batch started is dropped, never counted.
func (s *Store) take() []*keyBatch {
	s.bmu.Lock()
	defer s.bmu.Unlock()

	var (
		out  []*keyBatch
		byID = map[string]*keyBatch{}
		left = s.queue[:0]
	)

	for _, req := range s.queue {
		if err := req.ctx.Err(); err != nil {
			req.finish(tokenstore.Record{}, unavailable(err))

			continue
		}

		kb, ok := byID[req.id]
		if !ok && len(out) >= maxBatchRecords {
			left = append(left, req)

			continue
		}

		if !ok {
			kb = &keyBatch{id: req.id, key: s.key(req.id)}
			byID[req.id], out = kb, append(out, kb)
		}

		kb.reqs = append(kb.reqs, req)
	}

	clear(s.queue[len(left):])
	s.queue = left

	return out
}

// runBatch takes one batch and commits it within the store's timeout.
func (s *Store) runBatch(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()

	batch := s.take()

	live, err := s.readUnknown(ctx, batch)
	if err != nil {
		finishAll(batch, err)

		return
	}

	s.commit(ctx, live)
}

// readUnknown starts each record of batch from the one last seen here, and
// reads in one round those it has not seen. It returns the records that
// remain to be changed: a record that is gone or corrupt ends its changes.
func (s *Store) readUnknown(ctx context.Context, batch []*keyBatch) ([]*keyBatch, error) {
	var unknown []*keyBatch

	live := batch[:0:0]

	for _, kb := range batch {
		if k, ok := s.recall(kb.id); ok {
			kb.k = k
			live = append(live, kb)
		} else {
			unknown = append(unknown, kb)
		}
	}

	if len(unknown) == 0 {
		return live, nil
	}

	ops := make([]clientv3.Op, len(unknown))
	for i, kb := range unknown {
		ops[i] = clientv3.OpGet(kb.key)
	}

	resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, unavailable(err)
	}

	for i, kb := range unknown {
		rec, rev, err := s.decode(kb.id, resp.Responses[i].GetResponseRange().GetKvs())
		if err != nil {
			kb.finish(err)

			continue
		}

		kb.k, kb.fresh = knownRecord{rec: rec, rev: rev}, true
		live = append(live, kb)
	}

	return live, nil
}

// commit writes the changes of the records in live, each compared on its
// revision. A transaction whose compare fails is split: the records that
// did not change go again on their own, the changed ones with the changes
// applied again to the records as they are now.
func (s *Store) commit(ctx context.Context, live []*keyBatch) {
	groups := [][]*keyBatch{live}

	for attempt := 0; len(groups) > 0; attempt++ {
		g := groups[0]
		groups = groups[1:]

		if attempt >= maxAttempts {
			finishAll(g, fmt.Errorf("%w: too many concurrent changes of tokens", tokenstore.ErrUnavailable))

			continue
		}

		same, changed, err := s.commitGroup(ctx, g)
		if err != nil {
			for _, kb := range g {
				s.forget(kb.id)
			}

			finishAll(g, err)

			continue
		}

		for _, next := range [][]*keyBatch{changed, same} {
			if len(next) > 0 {
				groups = append([][]*keyBatch{next}, groups...)
			}
		}
	}
}

// commitGroup applies the changes of g and commits them in one transaction.
// On a failed compare it returns the records that had not changed and those
// that had, read anew; every other change is finished.
func (s *Store) commitGroup(ctx context.Context, g []*keyBatch) (same, changed []*keyBatch, err error) {
	var cmps []clientv3.Cmp

	var puts, gets []clientv3.Op

	txnOf := g[:0:0]

	for _, kb := range g {
		kb.apply()

		if !kb.write && kb.fresh {
			kb.done() // refused on the record as it was read in this batch

			continue
		}

		// A record only refused is compared too: if it is unchanged, the
		// refusals were of the record as it is.
		txnOf = append(txnOf, kb)
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(kb.key), "=", kb.k.rev))
		gets = append(gets, clientv3.OpGet(kb.key))

		if kb.write {
			data, err := tokenstore.MarshalRecord(kb.next)
			if err != nil {
				return nil, nil, err
			}

			puts = append(puts, clientv3.OpPut(kb.key, string(data)))
		}
	}

	if len(txnOf) == 0 {
		return nil, nil, nil
	}

	resp, err := s.cli.Txn(ctx).If(cmps...).Then(puts...).Else(gets...).Commit()
	if err != nil {
		return nil, nil, unavailable(err)
	}

	if resp.Succeeded {
		for _, kb := range txnOf {
			if kb.write {
				s.remember(kb.next, resp.Header.Revision)
			}

			kb.done()
		}

		return nil, nil, nil
	}

	same, changed = s.sortFailed(txnOf, resp)

	return same, changed, nil
}

// sortFailed splits the records of a transaction whose compare failed into
// those unchanged and those changed, the latter read anew from the
// transaction's answer; a record gone or corrupt ends its changes.
func (s *Store) sortFailed(txnOf []*keyBatch, resp *clientv3.TxnResponse) (same, changed []*keyBatch) {
	for i, kb := range txnOf {
		kvs := resp.Responses[i].GetResponseRange().GetKvs()
		if len(kvs) > 0 && kvs[0].ModRevision == kb.k.rev {
			same = append(same, kb)

			continue
		}

		rec, rev, err := s.decode(kb.id, kvs)
		if err != nil {
			kb.finish(err)

			continue
		}

		kb.k, kb.fresh = knownRecord{rec: rec, rev: rev}, true
		changed = append(changed, kb)
	}

	return same, changed
}

// apply runs the changes on the record in turn, each on the record as the
// ones before it left it, and keeps their outcomes.
func (kb *keyBatch) apply() {
	kb.next, kb.write = kb.k.rec, false
	kb.outs = kb.outs[:0]

	for _, req := range kb.reqs {
		r := kb.next
		if err := req.fn(&r); err != nil {
			kb.outs = append(kb.outs, outcome{err: err})

			continue
		}

		kb.next, kb.write = r, true
		kb.outs = append(kb.outs, outcome{rec: r})
	}
}

// done hands each change its outcome, once.
func (kb *keyBatch) done() {
	if kb.ended {
		return
	}

	kb.ended = true

	for i, req := range kb.reqs {
		req.done <- kb.outs[i]
	}
}

// finish ends every change of kb with err, unless they ended already.
func (kb *keyBatch) finish(err error) {
	if kb.ended {
		return
	}

	kb.outs = kb.outs[:0]
	for range kb.reqs {
		kb.outs = append(kb.outs, outcome{err: err})
	}

	kb.done()
}

func finishAll(batch []*keyBatch, err error) {
	for _, kb := range batch {
		kb.finish(err)
	}
}
