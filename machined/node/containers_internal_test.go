package node

import (
	"testing"

	"github.com/aegis-os/aegis/apid"
	"github.com/aegis-os/aegis/trustd"
)

// TestContainerOpenFilesCoverConnectionCaps keeps the containers' limit on
// open files above what their connection caps admit, with room for the
// descriptors a server holds besides its callers' connections.
func TestContainerOpenFilesCoverConnectionCaps(t *testing.T) {
	// Open connections and those waiting for a slot each hold a descriptor.
	for name, connections := range map[string]int{
		"apid":   apid.MaxConnections + apid.MaxWaiting,
		"trustd": trustd.MaxConnections + trustd.MaxWaiting,
	} {
		if containerOpenFiles < 2*connections {
			t.Errorf("containerOpenFiles %d leaves %s (%d connections) too little room", containerOpenFiles, name, connections)
		}
	}
}
