package etcdstore

// NewReadFirst returns a store that reads a record before every change, as
// the store did before it kept the last known record per id: the
// benchmark's point of comparison.
func NewReadFirst(cfg Config) (*Store, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}

	s.noCache = true

	return s, nil
}

// Queued returns how many changes wait for the next batch.
func (s *Store) Queued() int {
	s.bmu.Lock()
	defer s.bmu.Unlock()

	return len(s.queue)
}
