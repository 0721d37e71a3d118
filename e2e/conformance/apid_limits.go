package conformance

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/aegis-os/aegis/apid"
)

// limitCases send more than apid takes: metadata over its header list
// limit, messages over its message limit and over machined's.
func limitCases() []*Case {
	return []*Case{
		rawHeadersCase("metadata of 70 KiB in 70 headers (raw HTTP/2)", "stream reset (FRAME_SIZE_ERROR)", 70, 1<<10),
		rawHeadersCase("one metadata value of 70 KiB (raw HTTP/2)", "connection closed", 1, 70<<10),
		callCase(fmt.Sprintf("request of %d MiB × ServiceRestart", apid.MaxMessageSize>>20+1), codes.ResourceExhausted.String(), pickAdmin, nil,
			restartWithID(apid.MaxMessageSize+(1<<20))),
		callCase("request of 10 MiB × ServiceRestart (over machined's limit)", codes.ResourceExhausted.String(), pickAdmin, nil,
			restartWithID(10<<20)),
	}
}

func restartWithID(size int) call {
	return func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := machine.NewMachineServiceClient(c).ServiceRestart(ctx, &machine.ServiceRestartRequest{Id: strings.Repeat("x", size)})

		return err
	}
}

// rawHeadersCase sends, as admin, a Version call whose metadata holds n
// headers of size bytes each, over a raw HTTP/2 connection: gRPC clients
// refuse to send metadata over the limit the server announces, so only a
// raw client shows what the server itself does with it.
func rawHeadersCase(name, want string, n, size int) *Case {
	return &Case{
		Group: "apid", Name: name, Expected: want,
		Run: func(ctx context.Context, e *Env, r *Report) string {
			got, err := rawCall(ctx, e.clientTLS(e.Target, e.ids.admin), apidAddr(e.Target), n, size)
			if err != nil {
				r.Problemf("raw call: %v", err)
			}

			return got
		},
	}
}

// rawCall opens an HTTP/2 connection, sends one request with the padding
// headers and reports how the server ended it.
func rawCall(ctx context.Context, cfg *tls.Config, addr string, n, size int) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()

	d := tls.Dialer{Config: cfg}

	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "not run", err
	}
	defer conn.Close() //nolint:errcheck // a probe connection

	deadline, _ := ctx.Deadline()
	if err = conn.SetDeadline(deadline); err != nil {
		return "not run", err
	}

	if _, err = conn.Write([]byte(http2.ClientPreface)); err != nil {
		return "not run", err
	}

	fr := http2.NewFramer(conn, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)

	if err = fr.WriteSettings(); err != nil {
		return "not run", err
	}

	if err = writeHeaders(fr, requestHeaders(addr, n, size)); err != nil {
		return "not run", err
	}

	return readVerdict(fr)
}

// requestHeaders encodes a gRPC request for Version with n padding headers.
func requestHeaders(authority string, n, size int) []byte {
	var buf bytes.Buffer

	enc := hpack.NewEncoder(&buf)
	for _, f := range []hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: "https"},
		{Name: ":path", Value: machine.MachineService_Version_FullMethodName},
		{Name: ":authority", Value: authority},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "te", Value: "trailers"},
	} {
		enc.WriteField(f) //nolint:errcheck // writes to a bytes.Buffer
	}

	pad := strings.Repeat("a", size)
	for i := range n {
		enc.WriteField(hpack.HeaderField{Name: "x-conformance-pad-" + strconv.Itoa(i), Value: pad, Sensitive: true}) //nolint:errcheck // bytes.Buffer
	}

	return buf.Bytes()
}

// writeHeaders sends block on stream 1 as HEADERS and CONTINUATION frames
// of the default maximum frame size, ending the stream.
func writeHeaders(fr *http2.Framer, block []byte) error {
	const maxFrame = 16 << 10

	first := block[:min(len(block), maxFrame)]
	block = block[len(first):]

	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndStream: true, EndHeaders: len(block) == 0}); err != nil {
		return err
	}

	for len(block) > 0 {
		part := block[:min(len(block), maxFrame)]
		block = block[len(part):]

		if err := fr.WriteContinuation(1, len(block) == 0, part); err != nil {
			return err
		}
	}

	return nil
}

// readVerdict reads frames until the server ends stream 1 or the
// connection, and names how. A header block the server cannot decode
// within its limit is a connection error in HTTP/2: the connection ends,
// with or without a GOAWAY first.
func readVerdict(fr *http2.Framer) (string, error) {
	for {
		f, err := fr.ReadFrame()
		if errors.Is(err, io.EOF) {
			return "connection closed", nil
		}

		if err != nil {
			return "connection error", err
		}

		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err = fr.WriteSettingsAck(); err != nil {
					return "connection error", err
				}
			}
		case *http2.RSTStreamFrame:
			return fmt.Sprintf("stream reset (%s)", f.ErrCode), nil
		case *http2.GoAwayFrame:
			return fmt.Sprintf("connection closed (GOAWAY %s)", f.ErrCode), nil
		case *http2.MetaHeadersFrame:
			if v := f.PseudoValue("status"); v != "" && v != "200" {
				return "HTTP " + v, nil
			}

			if st := headerValue(f, "grpc-status"); st != "" {
				n, _ := strconv.Atoi(st)

				return "gRPC " + codes.Code(n).String(), nil //nolint:gosec // a status code
			}
		}
	}
}

// headerValue is the value of a regular header field of f, or "".
func headerValue(f *http2.MetaHeadersFrame, name string) string {
	for _, hf := range f.RegularFields() {
		if hf.Name == name {
			return hf.Value
		}
	}

	return ""
}
