package metricstest

import (
	"regexp"
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Recorder is a Registerer that keeps the names of every series family
// registered through it, from the collectors' descriptions: a vector with
// no series yet, or a collector that reports nothing on this machine (a
// worker's etcd series), is named all the same. It registers nothing
// else; Wrap passes the registrations on to a registry.
type Recorder struct {
	next prometheus.Registerer

	mu    sync.Mutex
	names map[string]bool
}

// NewRecorder returns a Recorder passing registrations on to next.
func NewRecorder(next prometheus.Registerer) *Recorder {
	return &Recorder{next: next, names: map[string]bool{}}
}

// descName reads a description's name: prometheus.Desc shows it only in
// its String.
var descName = regexp.MustCompile(`fqName: "([^"]+)"`)

// Register records c's families and registers it with the next registry.
func (r *Recorder) Register(c prometheus.Collector) error {
	if err := r.next.Register(c); err != nil {
		return err
	}

	ch := make(chan *prometheus.Desc)

	go func() {
		c.Describe(ch)
		close(ch)
	}()

	r.mu.Lock()
	defer r.mu.Unlock()

	for d := range ch {
		if m := descName.FindStringSubmatch(d.String()); m != nil {
			r.names[m[1]] = true
		}
	}

	return nil
}

// MustRegister registers cs, panicking on an error as the registry's does.
func (r *Recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister unregisters c from the next registry; its names stay
// recorded.
func (r *Recorder) Unregister(c prometheus.Collector) bool { return r.next.Unregister(c) }

// Names are the recorded family names, sorted.
func (r *Recorder) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()

	out := make([]string, 0, len(r.names))
	for n := range r.names {
		out = append(out, n)
	}

	sort.Strings(out)

	return out
}
