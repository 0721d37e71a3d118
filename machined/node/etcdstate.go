package node

import (
	"maps"
	"slices"
	"sync"

	"github.com/aegis-os/aegis/client/resourcetypes"
	"github.com/aegis-os/aegis/machined/etcd"
	"github.com/aegis-os/aegis/machined/resourceapi"
)

// etcdState is a control plane's etcd, made at its first boot and kept
// across reboots, with what its member reports: the certificates it was
// issued and the trusted CAs it loaded.
type etcdState struct {
	mu sync.Mutex
	e  *etcd.Etcd
	// spec is etcd's container, with the containerd runtime; set with e.
	spec   *containerSpec
	issued map[string][]byte // etcd's certificates by name, as last issued
	// loaded is the trusted etcd CAs (PEM) the running member loaded at
	// its start, nil while it does not run.
	loaded []byte
}

// member is the node's etcd, nil before its first boot as a control plane
// with an etcd CA.
func (s *etcdState) member() *etcd.Etcd {
	s.mu.Lock()
	defer s.mu.Unlock()

	return s.e
}

// set records the node's etcd and, when it runs as one, its container.
func (s *etcdState) set(e *etcd.Etcd, spec *containerSpec) {
	s.mu.Lock()
	s.e, s.spec = e, spec
	s.mu.Unlock()
}

// container is etcd's container spec, nil when etcd runs as a process.
func (s *etcdState) container() *containerSpec {
	s.mu.Lock()
	defer s.mu.Unlock()

	return s.spec
}

// memberAndLoaded is the node's etcd and the trusted CAs its member
// loaded, read together.
func (s *etcdState) memberAndLoaded() (*etcd.Etcd, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()

	return s.e, s.loaded
}

// recordIssued keeps a certificate etcd was issued.
func (s *etcdState) recordIssued(name string, certPEM []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()

	if s.issued == nil {
		s.issued = map[string][]byte{}
	}

	s.issued[name] = certPEM
}

// setLoaded records the trusted CAs the member loaded, nil at its end.
func (s *etcdState) setLoaded(trustedPEM []byte) {
	s.mu.Lock()
	s.loaded = trustedPEM
	s.mu.Unlock()
}

func (s *etcdState) loadedPEM() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()

	return s.loaded
}

// issuedResources are etcd's certificates as last issued, one resource
// each ("etcd-" and its name), by name.
func (s *etcdState) issuedResources() []resourceapi.Certificate {
	s.mu.Lock()
	defer s.mu.Unlock()

	out := make([]resourceapi.Certificate, 0, len(s.issued))
	for _, name := range slices.Sorted(maps.Keys(s.issued)) {
		out = append(out, resourceapi.Certificate{ID: "etcd-" + name, Kind: resourcetypes.CertKindEtcd, PEM: s.issued[name]})
	}

	return out
}
