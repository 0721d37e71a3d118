package upgrade

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// LeaseKey is the etcd key a control plane holds while it upgrades: its
// value is the holder's name. Only one control plane restarts for an
// upgrade at a time, so two never take etcd's quorum with them.
const LeaseKey = "/aegis/upgrade/lease"

// LeaseTTL bounds how long a lease outlives a holder that never releases
// it (a node that died in its trial): the trial's longest bound, with
// the restarts it takes.
const LeaseTTL = MaxTrialTimeout + time.Minute

// AcquireLease takes the upgrade lease for name, for ttl, unless another
// holds it: then it refuses with ErrLeaseHeld naming the holder. Taking it
// again for the same name renews it.
func AcquireLease(ctx context.Context, cli *clientv3.Client, name string, ttl time.Duration) error {
	grant, err := cli.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		return fmt.Errorf("upgrade: taking the upgrade lease: %w", err)
	}

	put := clientv3.OpPut(LeaseKey, name, clientv3.WithLease(grant.ID))

	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(LeaseKey), "=", 0)).
		Then(put).
		Else(clientv3.OpGet(LeaseKey)).Commit()
	if err != nil {
		return fmt.Errorf("upgrade: taking the upgrade lease: %w", err)
	}

	if resp.Succeeded {
		return nil
	}

	holder := ""
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
		holder = string(kvs[0].Value)
	}

	if holder == name {
		// Ours from an earlier attempt: renew it for this one.
		if _, err := cli.Put(ctx, LeaseKey, name, clientv3.WithLease(grant.ID)); err != nil {
			return fmt.Errorf("upgrade: renewing the upgrade lease: %w", err)
		}

		return nil
	}

	cli.Revoke(ctx, grant.ID) //nolint:errcheck // unused; it expires anyway

	return fmt.Errorf("%w: %s holds the upgrade lease; wait until it is healthy on its new version", ErrLeaseHeld, holder)
}

// ReleaseLease gives the lease back if name holds it; a lease of another
// is left alone.
func ReleaseLease(ctx context.Context, cli *clientv3.Client, name string) error {
	_, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(LeaseKey), "=", name)).
		Then(clientv3.OpDelete(LeaseKey)).Commit()
	if err != nil {
		return fmt.Errorf("upgrade: releasing the upgrade lease: %w", err)
	}

	return nil
}
