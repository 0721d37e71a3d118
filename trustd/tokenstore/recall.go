package tokenstore

import (
	"context"
	"time"
)

// Recaller is a Store that keeps the last state it saw of each record: a
// store shared by the control planes (etcd), where reading the record as it
// is now costs a round through the cluster. A caller may judge a token on
// the kept record, which may be stale, provided it counts the use with
// UseIf: the atomic step judges the record as it is then, so a token used
// up, revoked or replaced since the record was kept is refused there.
type Recaller interface {
	Store
	// Recall returns the record with id as this store last saw it, and
	// false if it keeps none. It does not contact the store's backend.
	Recall(id string) (Record, bool)
	// UseIf is Use with check applied, in the same atomic step, to the
	// record as it is then, before the use is counted: if check refuses,
	// nothing is counted and its error is returned.
	UseIf(ctx context.Context, id string, now time.Time, check func(Record) error) (Record, error)
}
