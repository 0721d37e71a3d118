// Package h2ping counts the HTTP/2 PING frames one end of a gRPC
// connection sends on its own, not in answer to the other's. An end whose
// flow-control windows grow with gRPC's bandwidth estimator pings the
// other on the first data after each answered ping (a server on request
// data, a client on response data): a PING out and its ACK back on every
// call made one after the other, which tests of fixed windows catch with
// this.
package h2ping

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/credentials"
)

// Counter counts the PINGs servers send on the connections made with its
// Credentials, and those clients send on the connections accepted with its
// ServerCredentials.
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

// Credentials wraps a client's inner credentials so that what servers
// send on the connections it secures is read as HTTP/2 frames after
// decryption.
func (c *Counter) Credentials(inner credentials.TransportCredentials) credentials.TransportCredentials {
	return creds{TransportCredentials: inner, c: c}
}

// ServerCredentials wraps a server's inner credentials so that what clients
// send on the connections it accepts is read as HTTP/2 frames after
// decryption.
func (c *Counter) ServerCredentials(inner credentials.TransportCredentials) credentials.TransportCredentials {
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

	return w.c.tee(conn, false), info, nil
}

func (w creds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := w.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return nil, nil, err
	}

	return w.c.tee(conn, true), info, nil
}

func (w creds) Clone() credentials.TransportCredentials {
	return creds{TransportCredentials: w.TransportCredentials.Clone(), c: w.c}
}

// tee returns conn with what it reads handed to a frame reader too; a
// server's reader first takes the client's connection preface.
func (c *Counter) tee(conn net.Conn, preface bool) net.Conn {
	pr, pw := io.Pipe()
	go c.read(pr, preface)

	return &teeConn{Conn: conn, w: pw}
}

// read parses the other end's side of one connection until it ends.
func (c *Counter) read(r *io.PipeReader, preface bool) {
	if preface {
		got := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(r, got); err != nil || string(got) != http2.ClientPreface {
			c.fail(fmt.Errorf("h2ping: no client preface (%q, %v)", got, err))
			r.Close()

			return
		}
	}

	fr := http2.NewFramer(io.Discard, r)
	fr.SetMaxReadFrameSize(1 << 24)

	for {
		f, err := fr.ReadFrame()
		if err != nil {
			if err != io.EOF && err != io.ErrClosedPipe {
				c.fail(err)
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

// fail keeps the first error met reading frames.
func (c *Counter) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()

	if c.err == nil {
		c.err = err
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
