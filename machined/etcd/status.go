package etcd

import (
	"context"
	"fmt"
)

// Status is what the local member says of itself, for the metrics.
type Status struct {
	// Name is the member's name (Config.Name).
	Name string
	// ID is the member's ID, Leader the member it follows (zero when it
	// knows none).
	ID, Leader uint64
	// RaftTerm grows by one at each election.
	RaftTerm uint64
	// DBSize is the size of the database file; DBSizeInUse the part of
	// it in use (the rest is freed by a defragmentation).
	DBSize, DBSizeInUse int64
}

// LocalStatus asks the local member for its status, within ctx and at
// most dialTimeout: a member that does not answer that fast is reported
// as down rather than holding up a scrape. An error also comes for the
// errors (alarms) the member reports.
func (e *Etcd) LocalStatus(ctx context.Context) (Status, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()

	st, err := e.localStatus(ctx)
	if err != nil {
		return Status{Name: e.cfg.Name}, err
	}

	out := Status{
		Name: e.cfg.Name, Leader: st.Leader, RaftTerm: st.RaftTerm, DBSize: st.DbSize, DBSizeInUse: st.DbSizeInUse,
	}
	if st.Header != nil {
		out.ID = st.Header.MemberId
	}

	if len(st.Errors) > 0 {
		return out, fmt.Errorf("etcd: member %s reports %v", e.cfg.Name, st.Errors)
	}

	return out, nil
}
