package tokenstore

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Memory is a Store held in memory, lost when the process ends. It suits
// tests and nodes that want no persistent tokens.
type Memory struct {
	mu         sync.Mutex
	records    map[string]Record
	maxRecords int
}

// NewMemory returns an empty store holding at most maxRecords records; zero
// means DefaultMaxRecords.
func NewMemory(maxRecords int) *Memory {
	if maxRecords <= 0 {
		maxRecords = DefaultMaxRecords
	}

	return &Memory{records: map[string]Record{}, maxRecords: maxRecords}
}

// Create implements Store.
func (m *Memory) Create(_ context.Context, r Record) error {
	if err := r.Validate(); err != nil {
		return err
	}

	m.mu.Lock()
	defer m.mu.Unlock()

	if _, ok := m.records[r.ID]; ok {
		return ErrExists
	}

	if len(m.records) >= m.maxRecords {
		return fmt.Errorf("%w (%d)", ErrFull, m.maxRecords)
	}

	m.records[r.ID] = r.Clone()

	return nil
}

// Get implements Store.
func (m *Memory) Get(_ context.Context, id string) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()

	r, ok := m.records[id]
	if !ok {
		return Record{}, ErrNotFound
	}

	return r.Clone(), nil
}

// List implements Store.
func (m *Memory) List(context.Context) ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()

	out := make([]Record, 0, len(m.records))
	for _, r := range m.records {
		out = append(out, r.Clone())
	}

	SortRecords(out)

	return out, nil
}

// Revoke implements Store.
func (m *Memory) Revoke(_ context.Context, id string, at time.Time) (Record, error) {
	return m.update(id, func(r *Record) error { return r.RevokeAt(at) })
}

// Use implements Store.
func (m *Memory) Use(_ context.Context, id string, now time.Time) (Record, error) {
	return m.update(id, func(r *Record) error { return r.UseAt(now) })
}

// Prune implements Store.
func (m *Memory) Prune(_ context.Context, endedBefore time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()

	n := 0

	for id, r := range m.records {
		if r.Ended().Before(endedBefore) {
			delete(m.records, id)
			n++
		}
	}

	return n, nil
}

// update applies change to a copy of the record and stores it only if
// change succeeds, all under the lock.
func (m *Memory) update(id string, change func(*Record) error) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()

	r, ok := m.records[id]
	if !ok {
		return Record{}, ErrNotFound
	}

	r = r.Clone()
	if err := change(&r); err != nil {
		return Record{}, err
	}

	m.records[id] = r

	return r.Clone(), nil
}
