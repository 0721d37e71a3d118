package rotation_test

import (
	"context"
	"testing"
	"time"

	"github.com/aegis-os/aegis/api/rotation"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/client/rotationstate"
	"github.com/aegis-os/aegis/internal/testutil/etcdtest"
	rot "github.com/aegis-os/aegis/machined/rotation"
)

// TestStoreKinds: the OS CA's and the etcd CA's rotations are kept under
// keys of their own, so one in progress neither blocks nor overwrites the
// other, and each is read back as its kind.
func TestStoreKinds(t *testing.T) {
	e, _ := etcdtest.Start(t)

	store, err := rot.NewStore(rot.StoreConfig{Client: etcdtest.Client(t, e), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	now := time.Now()
	oldCA, newCA := catest.NewCA(t, ca.Ed25519, now), catest.NewCA(t, ca.Ed25519, now)

	osRev, err := store.Put(ctx, &rotation.Rotation{Ca: "os", Step: rotationstate.StepAccepted, OldCa: oldCA.CertPEM, NewCa: newCA.CertPEM}, 0)
	if err != nil {
		t.Fatal(err)
	}

	// The etcd kind starts from revision 0 although an OS rotation is
	// recorded: its key is another.
	if _, err = store.Put(ctx, &rotation.Rotation{Ca: "etcd", Step: rotationstate.StepStarted, OldCa: newCA.CertPEM, NewCa: oldCA.CertPEM}, 0); err != nil {
		t.Fatalf("an etcd rotation beside an OS one: %v", err)
	}

	gotOS, rev, err := store.Get(ctx, "os")
	if err != nil || rev != osRev || gotOS.GetCa() != "os" || gotOS.GetStep() != rotationstate.StepAccepted {
		t.Fatalf("the OS record after the etcd one was put: %v at %d, %v", gotOS, rev, err)
	}

	gotEtcd, _, err := store.Get(ctx, "etcd")
	if err != nil || gotEtcd.GetCa() != "etcd" || gotEtcd.GetStep() != rotationstate.StepStarted || string(gotEtcd.GetNewCa()) != string(oldCA.CertPEM) {
		t.Fatalf("the etcd record: %v, %v", gotEtcd, err)
	}
}
