// Package h2ping counts the HTTP/2 PING frames a server sends to a gRPC
// client on its own, not in answer to the client's. A server whose
// flow-control windows grow with gRPC's bandwidth estimator pings its
// client on the first request data after each answered ping: a PING out
// and its ACK back on every call made one after the other, which tests of
// fixed windows catch with this.
package h2ping

import (
	"context"
	"io"
	"net"
	"sync"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/credentials"
)

// Counter counts the PINGs servers send on the connections made with its
// Credentials.
type Counter struct {
	mu    sync.Mutex
	pings int
	err   error
}

// Pings returns the PINGs received that were not ACKs, and the first
// error met reading the server's frames (nil while all parsed).
func (c *Counter) Pings() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()

	return c.pings, c.err
}

// Credentials wraps inner so that what servers send on the connections
// it secures is read as HTTP/2 frames after decryption.
func (c *Counter) Credentials(inner credentials.TransportCredentials) credentials.TransportCredentials {
	return creds{TransportCredentials: inner, c: c}
}

type creds struct {
	credentials.TransportCredentials

	c *Counter
}

func (w creds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := w.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		return nil, nil, err
	}

	pr, pw := io.Pipe()
	go w.c.read(pr)

	return &teeConn{Conn: conn, w: pw}, info, nil
}

func (w creds) Clone() credentials.TransportCredentials {
	return creds{TransportCredentials: w.TransportCredentials.Clone(), c: w.c}
}

// read parses the server's side of one connection until it ends.
func (c *Counter) read(r *io.PipeReader) {
	fr := http2.NewFramer(io.Discard, r)
	fr.SetMaxReadFrameSize(1 << 24)

	for {
		f, err := fr.ReadFrame()
		if err != nil {
			if err != io.EOF && err != io.ErrClosedPipe {
				c.mu.Lock()
				c.err = err
				c.mu.Unlock()
			}

			r.Close()

			return
		}

		if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
			c.mu.Lock()
			c.pings++
			c.mu.Unlock()
		}
	}
}

// teeConn hands what it reads to the frame reader too.
type teeConn struct {
	net.Conn

	w    *io.PipeWriter
	once sync.Once
}

func (t *teeConn) Read(p []byte) (int, error) {
	n, err := t.Conn.Read(p)
	if n > 0 {
		// The frame reader only stops on a parse error, and then closes
		// its end: the write fails and the connection goes on.
		_, _ = t.w.Write(p[:n])
	}

	return n, err
}

func (t *teeConn) Close() error {
	t.once.Do(func() { t.w.Close() })

	return t.Conn.Close()
}
