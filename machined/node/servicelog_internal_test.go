package node

import (
	"path/filepath"
	"testing"

	"github.com/aegis-os/aegis/machined/system/logs"
)

// TestEveryServiceHasALog: the certificates service, which runs inside
// machined, has machined's log; a log nobody registered is not found.
func TestEveryServiceHasALog(t *testing.T) {
	dir := t.TempDir()
	n := &Node{logs: map[string]*logs.Log{}}

	for _, id := range []string{"machined", "apid"} {
		l, err := logs.Open(filepath.Join(dir, id+".log"), 1<<20)
		if err != nil {
			t.Fatal(err)
		}

		t.Cleanup(func() { l.Close() })

		n.logs[id] = l
	}

	if l, ok := n.ServiceLog(CertificatesService); !ok || l != n.logs["machined"] {
		t.Fatalf("log of %s: %v, %v; want machined's", CertificatesService, l, ok)
	}

	if l, ok := n.ServiceLog("apid"); !ok || l != n.logs["apid"] {
		t.Fatalf("log of apid: %v, %v", l, ok)
	}

	if _, ok := n.ServiceLog("nosuchservice"); ok {
		t.Fatal("a log for a service the node does not have")
	}
}
