package membership

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// SetAfterLoad makes f run after each of s.Follow's reads, before its watch
// starts: a test changes etcd in between.
func SetAfterLoad(s *Store, f func()) { s.afterLoad = f }

// SetBeforeRemove makes f run between Remove's read and its transaction.
func SetBeforeRemove(s *Store, f func()) { s.beforeRemove = f }

// SetBeforePut makes f run between Put's reads and its transaction.
func SetBeforePut(s *Store, f func()) { s.beforePut = f }

// Space is s.space: the check of a heartbeat's spacing for key.
func Space(s *Server, key string) error { return s.space(key) }

// SetKeepAlive makes s renew leases with f instead of etcd's keep-alive.
func SetKeepAlive(s *Store, f func(context.Context, clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error)) {
	s.keepAlive = f
}

// Holding is how many entries s holds now.
func Holding(s *Store) int {
	s.holds.mu.Lock()
	defer s.holds.mu.Unlock()

	return len(s.holds.entries)
}
