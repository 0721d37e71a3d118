package cosiread

import (
	"testing"

	"github.com/aegis-os/aegis/client/resourcetypes"
)

func TestColumnReadsSimplePaths(t *testing.T) {
	spec := map[string]any{
		"stage":   "running",
		"status":  map[string]any{"ready": true},
		"aliases": []any{"ms", "machinestatus"},
	}

	for path, want := range map[string]string{
		"{.stage}":        "running",
		"{.status.ready}": "true",
		"{.aliases[:]}":   "ms,machinestatus",
		"{.missing.deep}": "",
		"{.stage.deeper}": "",
	} {
		if got := Column(spec, path); got != want {
			t.Errorf("Column(%s) = %q, want %q", path, got, want)
		}
	}
}

func TestDocument(t *testing.T) {
	r := resourcetypes.NewNTPStatus()
	r.TypedSpec().Server = "127.0.0.1:123"

	for _, tt := range []struct{ node, want string }{{"", ""}, {"10.0.0.5", "10.0.0.5"}} {
		doc, err := Document(tt.node, r)
		if err != nil {
			t.Fatal(err)
		}

		if node, _ := doc["node"].(string); node != tt.want {
			t.Errorf("node %q: doc[node] = %v", tt.node, doc["node"])
		}

		md, _ := doc["metadata"].(map[string]any)
		if md["id"] != r.Metadata().ID() || Column(doc["spec"], "{.server}") != "127.0.0.1:123" {
			t.Errorf("node %q: doc = %v", tt.node, doc)
		}
	}
}
