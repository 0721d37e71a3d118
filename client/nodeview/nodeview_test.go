package nodeview

import (
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/aegis-os/aegis/client/resourcetypes"
)

func TestUntilText(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

	for _, tt := range []struct {
		at   time.Time
		want string
	}{
		{now.Add(23*time.Hour + 59*time.Minute + 30*time.Second), "23h59m"},
		{now.Add(3 * 24 * time.Hour), "3d"},
		{now.Add(-time.Second), "EXPIRED"},
		{time.Time{}, "none"},
	} {
		if got := UntilText(tt.at, now); got != tt.want {
			t.Errorf("UntilText(%v) = %q, want %q", tt.at, got, tt.want)
		}
	}
}

func TestTexts(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

	for _, tt := range []struct {
		name, got, want string
	}{
		{"services all up", ServicesText(3, nil), "3/3 up"},
		{"services down", ServicesText(4, []string{"etcd", "trustd"}), "2/4 up (down: etcd,trustd)"},
		{"memory", MemoryText(&machine.MemInfo{Memtotal: 4096 * 1024, Memfree: 1024 * 1024, Buffers: 512 * 1024, Cached: 512 * 1024}), "2048/4096 MiB"},
		{"memory over total", MemoryText(&machine.MemInfo{Memtotal: 1024, Memfree: 2048}), "0/1 MiB"},
		{"time host clock", TimeText(&resourcetypes.NTPStatusSpec{TrustHostClock: true}), "synced (host clock)"},
		{"time error", TimeText(&resourcetypes.NTPStatusSpec{Error: "no reply"}), "NOT synced: no reply"},
		{"time not synced", TimeText(&resourcetypes.NTPStatusSpec{}), "NOT synced"},
		{"time synced", TimeText(&resourcetypes.NTPStatusSpec{Synced: true, Server: "127.0.0.1:123", Offset: 1500 * time.Nanosecond}), "synced, 127.0.0.1:123 2µs"},
		{"certs none", CertsText(nil, now), "server none"},
		{"certs server and earliest CA", CertsText([]*resourcetypes.CertificateStatusSpec{
			{Kind: resourcetypes.CertKindServer, NotAfter: now.Add(12 * time.Hour)},
			{Kind: resourcetypes.CertKindAcceptedCA, NotAfter: now.Add(300 * 24 * time.Hour)},
			{Kind: resourcetypes.CertKindAcceptedCA, NotAfter: now.Add(100 * 24 * time.Hour)},
		}, now), "server 12h0m, CA 100d"},
		{"etcd with count", EtcdText("abc", 3), "member abc of 3"},
		{"etcd without count", EtcdText("abc", -1), "member abc"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestEventsKeepsTheLast(t *testing.T) {
	e := &Events{Keep: 2}
	for _, l := range []string{"a", "b", "c"} {
		e.add(l)
	}

	if got := e.Recent(); len(got) != 2 || got[0] != "b" || got[1] != "c" {
		t.Errorf("Recent() = %q, want [b c]", got)
	}

	none := &Events{}
	none.add("a")

	if got := none.Recent(); len(got) != 0 {
		t.Errorf("Keep 0: Recent() = %q", got)
	}
}
