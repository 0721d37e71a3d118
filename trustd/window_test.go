package trustd_test

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"testing"
	"time"

	securityapi "github.com/siderolabs/talos/pkg/machinery/api/security"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"

	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// TestCertificateSendsNoPing: a Certificate call costs the server no PING
// of its own. gRPC's bandwidth estimator would ping the client on the
// first request data after each answered ping, a record out and one in on
// every call made one after the other; trustd's fixed flow-control window
// turns it off. The call is spoken in raw HTTP/2, so every frame the
// server sends is seen.
func TestCertificateSendsNoPing(t *testing.T) {
	env := trustdtest.Start(t, trustdtest.Options{GateOpen: true})
	csr := trustdtest.SourceCSR(t, ca.Ed25519, trustdtest.CallerIP)

	conn, err := tls.Dial("tcp", env.Addr, &tls.Config{
		RootCAs: env.CAs.Pool(), ServerName: trustdtest.ListenIP, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS13,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	if err = conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}

	fr := http2.NewFramer(conn, conn)
	writeCall(t, conn, fr, csr)

	// One decoder for every header block: they share its table.
	dec := hpack.NewDecoder(4096, nil)

	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the answer: %v", err)
		}

		switch f := f.(type) {
		case *http2.PingFrame:
			if !f.IsAck() {
				t.Fatal("the server pinged during a Certificate call")
			}
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err = fr.WriteSettingsAck(); err != nil {
					t.Fatal(err)
				}
			}
		case *http2.HeadersFrame:
			st := grpcStatus(t, dec, f)
			if f.StreamEnded() {
				// The trailers: the call is over, and it must have
				// issued, or no ping would have been due.
				if st != "0" {
					t.Fatalf("the call ended with grpc-status %q", st)
				}

				return
			}
		}
	}
}

// writeCall sends the client preface and one Certificate call with the
// static token and csr on stream 1.
func writeCall(t *testing.T, conn *tls.Conn, fr *http2.Framer, csr []byte) {
	t.Helper()

	msg, err := proto.Marshal(&securityapi.CertificateRequest{Csr: csr})
	if err != nil {
		t.Fatal(err)
	}

	// A gRPC message: uncompressed flag, big-endian length, the message.
	body := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg))) //nolint:gosec // a CSR of a few hundred bytes
	body = append(body, msg...)

	var hdr bytes.Buffer

	enc := hpack.NewEncoder(&hdr)
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "https"}, {":path", securityapi.SecurityService_Certificate_FullMethodName}, {":authority", trustdtest.ListenIP},
		{"content-type", "application/grpc"}, {"te", "trailers"}, {wire.MetadataToken, trustdtest.StaticToken},
	} {
		if err = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			t.Fatal(err)
		}
	}

	if _, err = conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}

	if err = fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}

	if err = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hdr.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}

	if err = fr.WriteData(1, true, body); err != nil {
		t.Fatal(err)
	}
}

// grpcStatus returns the grpc-status field of a header block, if any.
func grpcStatus(t *testing.T, dec *hpack.Decoder, f *http2.HeadersFrame) string {
	t.Helper()

	fields, err := dec.DecodeFull(f.HeaderBlockFragment())
	if err != nil {
		t.Fatal(err)
	}

	for _, hf := range fields {
		if hf.Name == "grpc-status" {
			return hf.Value
		}
	}

	return ""
}
