package apid

import (
	"errors"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/protobuf/proto"
)

// FuzzApplyConfigurationSecrets: whatever a caller sends, apid either
// reads a role its secrets are for or refuses the request as unreadable;
// it never panics and never lets a request through without a role.
func FuzzApplyConfigurationSecrets(f *testing.F) {
	for _, data := range []string{
		"machine:\n  type: controlplane\n", "machine:\n  type: worker\n", "machine:\n  type: init\n",
		"machine: [", "machine:\n  type: root\n", "", "{machine: {type: worker}}", "machine:\n  type: [worker]\n",
	} {
		req, err := proto.Marshal(&machine.ApplyConfigurationRequest{Data: []byte(data)})
		if err != nil {
			f.Fatal(err)
		}

		f.Add(req)
	}

	f.Add([]byte{0xff, 0xff})

	f.Fuzz(func(t *testing.T, req []byte) {
		sc, err := applyConfigurationSecrets(req)
		if err != nil {
			if !errors.Is(err, errUnreadableSecrets) {
				t.Fatalf("error %v is not errUnreadableSecrets", err)
			}

			return
		}

		if sc.role != RoleControlPlane && sc.role != RoleWorker || sc.what == "" {
			t.Fatalf("secrets %+v: no role or no description", sc)
		}
	})
}
