package main

import "testing"

func TestPprofListensOnLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:6060", "192.0.2.1:6060", ":6060", "localhost:6060", "[::]:6060"} {
		if lis, err := listenPprof(addr); err == nil {
			lis.Close()
			t.Errorf("%s accepted", addr)
		}
	}

	lis, err := listenPprof("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	lis.Close()
}
