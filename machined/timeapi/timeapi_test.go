package timeapi_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/beevik/ntp"
	timepb "github.com/siderolabs/talos/pkg/machinery/api/time"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/machined/timeapi"
	"github.com/aegis-os/aegis/timesync"
)

type fakeSource struct {
	status  timesync.Status
	servers []string
	asked   []string
}

// The node hands the server its timesync.Service.
var _ timeapi.TimeSource = (*timesync.Service)(nil)

func (f *fakeSource) LastMeasurement() (string, time.Duration, time.Time) {
	return f.status.Server, f.status.Offset, f.status.Checked
}
func (f *fakeSource) Servers() []string    { return f.servers }
func (f *fakeSource) TrustHostClock() bool { return len(f.servers) == 0 }

func (f *fakeSource) Query(_ context.Context, server string) (*ntp.Response, error) {
	f.asked = append(f.asked, server)
	if server == "down.example" {
		return nil, errors.New("i/o timeout")
	}

	return &ntp.Response{ClockOffset: 3 * time.Second}, nil
}

var now = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func server(src timeapi.TimeSource) *timeapi.Server {
	return timeapi.New(timeapi.Config{Source: func() timeapi.TimeSource { return src }, Clock: catest.FixedClock(now)})
}

func TestTimeIsTheLastMeasurement(t *testing.T) {
	src := &fakeSource{servers: []string{"ntp.example"}, status: timesync.Status{
		Synced: true, Server: "ntp.example", Offset: -2 * time.Second, Checked: now,
	}}

	resp, err := server(src).Time(context.Background(), &emptypb.Empty{})
	if err != nil {
		t.Fatal(err)
	}

	m := resp.GetMessages()[0]
	if m.GetServer() != "ntp.example" || !m.GetLocaltime().AsTime().Equal(now) || !m.GetRemotetime().AsTime().Equal(now.Add(-2*time.Second)) {
		t.Fatalf("reply = %v", m)
	}

	if len(src.asked) != 0 {
		t.Fatalf("Time sent queries %v; it reads the last measurement", src.asked)
	}
}

func TestTimeRefusals(t *testing.T) {
	measuredNothing := &fakeSource{servers: []string{"ntp.example"}}
	trusted := &fakeSource{}
	tests := []struct {
		name string
		call func() error
		code codes.Code
		msg  string
	}{
		{"no time service yet", func() error {
			_, err := server(nil).Time(context.Background(), &emptypb.Empty{})
			return err
		}, codes.Unavailable, "not started"},
		{"nothing measured yet", func() error {
			_, err := server(measuredNothing).Time(context.Background(), &emptypb.Empty{})
			return err
		}, codes.Unavailable, "no NTP server has answered"},
		{"check of a foreign server", func() error {
			_, err := server(measuredNothing).TimeCheck(context.Background(), &timepb.TimeRequest{Server: "evil.example"})
			return err
		}, codes.InvalidArgument, "not one of the node's NTP servers"},
		{"check without servers", func() error {
			_, err := server(trusted).TimeCheck(context.Background(), &timepb.TimeRequest{})
			return err
		}, codes.FailedPrecondition, "host clock"},
		{"check of a server that does not answer", func() error {
			_, err := server(&fakeSource{servers: []string{"down.example"}}).TimeCheck(context.Background(), &timepb.TimeRequest{})
			return err
		}, codes.Unavailable, "down.example"},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if status.Code(err) != tt.code || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want %s saying %q", err, tt.code, tt.msg)
			}
		})
	}

	if len(measuredNothing.asked) != 0 {
		t.Fatalf("a refused check sent queries: %v", measuredNothing.asked)
	}
}

func TestTimeCheckAsksTheFirstServerByDefault(t *testing.T) {
	src := &fakeSource{servers: []string{"a.example", "b.example"}}

	resp, err := server(src).TimeCheck(context.Background(), &timepb.TimeRequest{})
	if err != nil {
		t.Fatal(err)
	}

	if m := resp.GetMessages()[0]; m.GetServer() != "a.example" || !m.GetRemotetime().AsTime().Equal(now.Add(3*time.Second)) {
		t.Fatalf("reply = %v", m)
	}

	if strings.Join(src.asked, ",") != "a.example" {
		t.Fatalf("asked %v", src.asked)
	}
}

func TestTrustedHostClockIsItsOwnReference(t *testing.T) {
	resp, err := server(&fakeSource{status: timesync.Status{Synced: true}}).Time(context.Background(), &emptypb.Empty{})
	if err != nil {
		t.Fatal(err)
	}

	if m := resp.GetMessages()[0]; m.GetServer() != "" || !m.GetRemotetime().AsTime().Equal(now) {
		t.Fatalf("reply = %v", m)
	}
}
