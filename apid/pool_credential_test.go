package apid

import (
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/aegis-os/aegis/internal/clock"
)

// TestPoolRetiresOnCredentialChange: once the forwarding certificate has
// changed (a CA rotation re-issued it), a call gets a new connection,
// which presents the new certificate; the old connection ends when the
// calls it carries end, not before.
func TestPoolRetiresOnCredentialChange(t *testing.T) {
	cred := "old"
	dials := 0
	p := newPool(poolConfig{
		dial: func(tg target) (*grpc.ClientConn, error) {
			dials++

			return grpc.NewClient("passthrough:///"+tg.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		},
		clock: clock.NewFake(time.Unix(0, 0)), max: 4, perCaller: 1 << 10, idle: time.Minute,
		credential: func() []byte { return []byte(cred) },
	})
	t.Cleanup(p.close)

	oldConn, release, err := p.get(tgt(t, "10.0.0.1"), admin)
	if err != nil {
		t.Fatal(err)
	}

	cred = "new"

	newConn, releaseNew, err := p.get(tgt(t, "10.0.0.1"), reader)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseNew()

	if newConn == oldConn || dials != 2 {
		t.Fatalf("the connection made with the old credential was reused (%d dials)", dials)
	}

	if oldConn.GetState() == connectivity.Shutdown {
		t.Fatal("a retired connection was closed under a call")
	}

	release()

	if oldConn.GetState() != connectivity.Shutdown {
		t.Fatal("a retired connection was not closed when its last call ended")
	}

	if again, r, _ := p.get(tgt(t, "10.0.0.1"), admin); again != newConn || dials != 2 {
		t.Fatal("the connection of the current credential was not kept")
	} else {
		r()
	}
}
