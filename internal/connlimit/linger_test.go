package connlimit

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
)

// TestCloseBeforeACallLetsTheLastWordArrive: a server that refuses a
// connection before any call (a TLS alert, say) and closes it with the
// client's data unread must not reset it: the client reads the last bytes
// and then an orderly end, even though it wrote after them. It must hold
// when the server closes twice, as gRPC does after a failed TLS handshake
// (crypto/tls's Conn closes the connection under it, then gRPC does).
func TestCloseBeforeACallLetsTheLastWordArrive(t *testing.T) {
	for _, closes := range []int{1, 2} {
		t.Run(fmt.Sprintf("closed %d times", closes), func(t *testing.T) { checkLastWordArrives(t, closes) })
	}
}

func checkLastWordArrives(t *testing.T, closes int) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	lis := newLimiter(t, 4, 8, clock.Real()).Wrap(raw)
	defer lis.Close() //nolint:errcheck // the test's own listener

	served := make(chan error, 1)

	go func() {
		c, err := lis.Accept()
		if err != nil {
			served <- err

			return
		}

		// Wait for the client's data, leave it unread, answer, close.
		buf := make([]byte, 1)
		if _, err := c.Read(buf); err != nil {
			served <- err

			return
		}

		time.Sleep(50 * time.Millisecond) // the rest of the client's data arrives, unread

		_, err = c.Write([]byte("refused"))
		for range closes {
			err = errors.Join(err, c.Close())
		}
		served <- err
	}()

	client, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close() //nolint:errcheck // the test's own connection

	if _, err := client.Write(make([]byte, 32<<10)); err != nil {
		t.Fatal(err)
	}

	if err := <-served; err != nil {
		t.Fatal(err)
	}

	// The client writes again after the server closed, as a TLS client
	// sends its HTTP/2 preface right behind its certificate.
	time.Sleep(50 * time.Millisecond)

	if _, err := client.Write([]byte("preface")); err != nil {
		t.Fatalf("write after the server's close: %v", err)
	}

	_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))

	got, err := io.ReadAll(client)
	if err != nil {
		t.Fatalf("read %q, then %v; want the server's answer and an orderly end", got, err)
	}

	if string(got) != "refused" {
		t.Fatalf("read %q, want %q", got, "refused")
	}
}
