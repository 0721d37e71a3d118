package timesync

import (
	"context"
	"io"
	"log/slog"
	"math/big"
	"testing"
	"time"

	"github.com/beevik/ntp"

	"github.com/aegis-os/aegis/internal/clock"
)

// FuzzReply covers an NTP server's answer as the time service judges it:
// the gate opens only for a reply fit for synchronization whose offset,
// plus half its round trip, is within the allowed offset, whatever the
// server claims, extreme values included.
func FuzzReply(f *testing.F) {
	f.Add(int64(0), int64(time.Millisecond), uint8(2), uint8(4), int64(0), int64(0), int64(time.Minute))
	f.Add(int64(time.Hour), int64(0), uint8(2), uint8(4), int64(0), int64(0), int64(time.Minute))
	f.Add(int64(-1<<63), int64(0), uint8(2), uint8(4), int64(0), int64(0), int64(0))
	f.Add(int64(0), int64(-1), uint8(1), uint8(4), int64(0), int64(0), int64(0))
	f.Add(int64(1<<62), int64(1<<62), uint8(2), uint8(4), int64(0), int64(0), int64(0))

	epoch := time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)
	maxOffset := time.Second

	f.Fuzz(func(t *testing.T, offset, rtt int64, stratum, version uint8, rootDelay, rootDisp, refAge int64) {
		resp := &ntp.Response{
			ClockOffset: time.Duration(offset), RTT: time.Duration(rtt), Stratum: stratum, Version: int(version),
			RootDelay: time.Duration(rootDelay), RootDispersion: time.Duration(rootDisp),
			Time: epoch, ReferenceTime: epoch.Add(-time.Duration(refAge)),
		}

		s, err := New(Config{
			Servers: []string{"127.8.9.2"}, MaxOffset: maxOffset, Clock: clock.NewFake(epoch),
			Query:  func(context.Context, string, time.Duration) (*ntp.Response, error) { return resp, nil },
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}

		s.round(context.Background())

		// |offset| + rtt/2 <= max, computed without overflow.
		bound := new(big.Int).Abs(big.NewInt(offset))
		bound.Add(bound, big.NewInt(rtt/2))
		want := resp.Validate() == nil && rtt >= 0 && bound.Cmp(big.NewInt(int64(maxOffset))) <= 0

		if s.Synced() != want {
			t.Fatalf("gate open = %v for offset %d, rtt %d (valid reply: %v)", s.Synced(), offset, rtt, resp.Validate())
		}
	})
}
