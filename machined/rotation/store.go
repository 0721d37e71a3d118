package rotation

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/aegis-os/aegis/api/rotation"
)

// StoreConfig says which etcd to use.
type StoreConfig struct {
	// Client talks to the cluster. Required; the caller closes it.
	Client *clientv3.Client
	// Prefix of the keys; empty means DefaultPrefix.
	Prefix string
	// Timeout bounds one operation; zero means DefaultTimeout.
	Timeout time.Duration
}

// Store keeps one rotation record per CA kind in etcd. Reads are
// linearizable; writes compare the record's revision, so two operators
// never drive one rotation at once. Without quorum every operation fails
// with ErrUnavailable.
type Store struct{ cfg StoreConfig }

// NewStore returns the store of cfg; it does not contact etcd.
func NewStore(cfg StoreConfig) (*Store, error) {
	if cfg.Client == nil {
		return nil, errors.New("rotation: no etcd client")
	}

	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}

	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}

	return &Store{cfg: cfg}, nil
}

// Get returns the record of kind and its revision; nil and 0 when none.
func (s *Store) Get(ctx context.Context, kind string) (*rotation.Rotation, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()

	resp, err := s.cfg.Client.Get(ctx, s.cfg.Prefix+kind)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}

	if len(resp.Kvs) == 0 {
		return nil, 0, nil
	}

	r, err := unmarshal(resp.Kvs[0].Value)

	return r, resp.Kvs[0].ModRevision, err
}

// Put records r if the record of its kind is still at expected (0: none
// recorded), and returns the new revision; otherwise ErrConflict.
func (s *Store) Put(ctx context.Context, r *rotation.Rotation, expected int64) (int64, error) {
	data, err := proto.Marshal(r)
	if err != nil {
		return 0, fmt.Errorf("rotation: encoding the record: %w", err)
	}

	if len(data) > MaxRecordSize {
		return 0, fmt.Errorf("%w: %d bytes, limit %d", ErrBadRecord, len(data), MaxRecordSize)
	}

	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()

	key := s.cfg.Prefix + r.GetCa()

	resp, err := s.cfg.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", expected)).
		Then(clientv3.OpPut(key, string(data))).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}

	if !resp.Succeeded {
		return 0, ErrConflict
	}

	return resp.Header.Revision, nil
}

func unmarshal(data []byte) (*rotation.Rotation, error) {
	if len(data) > MaxRecordSize {
		return nil, fmt.Errorf("%w: stored record of %d bytes, limit %d", ErrBadRecord, len(data), MaxRecordSize)
	}

	r := &rotation.Rotation{}
	if err := proto.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("%w: stored record: %w", ErrBadRecord, err)
	}

	return r, nil
}
