package conformance

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ntpServer answers NTPv4 client queries with the local time moved by an
// offset the suite sets: the test-only node's time source, which the
// time-gate case skews. It is a test server, serving loopback only.
type ntpServer struct {
	conn   net.PacketConn
	offset atomic.Int64 // nanoseconds
	done   chan struct{}
	once   sync.Once
}

// NTP packet layout (RFC 5905): 48 bytes, timestamps as seconds since 1900
// and a binary fraction.
const (
	ntpPacketSize = 48
	ntpEpochDelta = 2208988800 // seconds from 1900 to 1970
	ntpModeClient = 3
	ntpModeServer = 4
	ntpStratum    = 2
)

func startNTP(host string) (*ntpServer, error) {
	conn, err := net.ListenPacket("udp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}

	s := &ntpServer{conn: conn, done: make(chan struct{})}

	go s.serve()

	return s, nil
}

// Addr is host:port, as a machine config names a time server.
func (s *ntpServer) Addr() string { return s.conn.LocalAddr().String() }

// Skew makes every later answer off by d.
func (s *ntpServer) Skew(d time.Duration) { s.offset.Store(int64(d)) }

func (s *ntpServer) Close() {
	s.once.Do(func() {
		s.conn.Close() //nolint:errcheck // ends serve
		<-s.done
	})
}

func (s *ntpServer) serve() {
	defer close(s.done)

	buf := make([]byte, 512)

	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}

			continue
		}

		if n < ntpPacketSize || buf[0]&0x7 != ntpModeClient {
			continue
		}

		received := time.Now().Add(time.Duration(s.offset.Load()))

		if _, err := s.conn.WriteTo(s.reply(buf[:ntpPacketSize], received), from); err != nil {
			continue
		}
	}
}

// reply answers req: the client's transmit time becomes the origin, and
// the server's times are the local clock moved by the offset.
func (s *ntpServer) reply(req []byte, received time.Time) []byte {
	out := make([]byte, ntpPacketSize)
	version := req[0] >> 3 & 0x7

	out[0] = version<<3 | ntpModeServer // leap indicator 0: in sync
	out[1] = ntpStratum
	out[2] = req[2]
	out[3] = 0xec // precision 2^-20 s
	copy(out[12:16], "CONF")
	putNTPTime(out[16:24], received.Add(-time.Second)) // reference: a second ago
	copy(out[24:32], req[40:48])
	putNTPTime(out[32:40], received)
	putNTPTime(out[40:48], time.Now().Add(time.Duration(s.offset.Load())))

	return out
}

func putNTPTime(b []byte, t time.Time) {
	secs := uint64(t.Unix()) + ntpEpochDelta                     //nolint:gosec // times after 1970
	frac := (uint64(t.Nanosecond()) << 32) / uint64(time.Second) //nolint:gosec // nanoseconds are positive
	binary.BigEndian.PutUint32(b[0:4], uint32(secs))             //nolint:gosec // NTP era 0 wraps by design
	binary.BigEndian.PutUint32(b[4:8], uint32(frac))             //nolint:gosec // below 2^32
}
