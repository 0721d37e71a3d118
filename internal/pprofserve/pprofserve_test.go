package pprofserve_test

import (
	"testing"

	"github.com/aegis-os/aegis/internal/pprofserve"
)

func TestPprofListensOnLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:6060", "192.0.2.1:6060", ":6060", "localhost:6060", "[::]:6060"} {
		if lis, err := pprofserve.Listen(addr); err == nil {
			lis.Close()
			t.Errorf("%s accepted", addr)
		}
	}

	lis, err := pprofserve.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	lis.Close()
}
