package rollout

import (
	"context"
	"fmt"

	"github.com/aegis-os/aegis/api/rotation"
)

// Record is the recorded state of a rotation of one CA, kept in the
// control planes' etcd: the step a resumed rotation goes on from. Each
// write compares the revision it read, so that of two runs at once only
// one goes on.
type Record struct {
	w   *Walker
	ca  string
	rec *rotation.Rotation
	rev int64
}

// ReadRecord reads the recorded rotation of the CA named kind from the
// endpoint's etcd.
func (w *Walker) ReadRecord(ctx context.Context, kind string) (*Record, error) {
	ctx, cancel := context.WithTimeout(ctx, w.opts.CallTimeout)
	defer cancel()

	resp, err := rotation.NewRotationServiceClient(w.client.Conn()).Get(ctx, &rotation.GetRequest{Ca: kind})
	if err = w.Check(resp, err); err != nil {
		return nil, fmt.Errorf("reading the rotation state (the endpoint must be a control plane): %w", err)
	}

	return &Record{w: w, ca: kind, rec: resp.GetMessages()[0].GetRotation(), rev: resp.GetMessages()[0].GetRevision()}, nil
}

// Get is the rotation as last read or written; nil if none was ever
// recorded.
func (r *Record) Get() *rotation.Rotation { return r.rec }

// Step records that step is complete, the CAs unchanged.
func (r *Record) Step(ctx context.Context, step int32) error {
	return r.Put(ctx, &rotation.Rotation{Ca: r.ca, Step: step, OldCa: r.rec.GetOldCa(), NewCa: r.rec.GetNewCa()})
}

// Put replaces the record with next, if nobody wrote it since it was read.
func (r *Record) Put(ctx context.Context, next *rotation.Rotation) error {
	ctx, cancel := context.WithTimeout(ctx, r.w.opts.CallTimeout)
	defer cancel()

	resp, err := rotation.NewRotationServiceClient(r.w.client.Conn()).Put(ctx, &rotation.PutRequest{Rotation: next, ExpectedRevision: r.rev})
	if err = r.w.Check(resp, err); err != nil {
		return fmt.Errorf("recording step %d of the rotation: %w", next.GetStep(), err)
	}

	r.rec, r.rev = resp.GetMessages()[0].GetRotation(), resp.GetMessages()[0].GetRevision()

	return nil
}
