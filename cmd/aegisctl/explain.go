package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/internal/replies"
	"github.com/aegis-os/aegis/internal/wire"
	"github.com/aegis-os/aegis/renewal"
)

// explain turns the error of a call into one a person can act on: which
// endpoint could not be reached and why, which roles a refused method
// needs, what the node said. Errors that are not gRPC statuses pass as
// they are.
func (s *session) explain(err error) error {
	st, ok := status.FromError(err)
	if !ok || err == nil {
		return err
	}

	switch st.Code() {
	case codes.Unavailable:
		if strings.Contains(st.Message(), "remote error: tls: bad certificate") {
			// TLS 1.3: the server's verdict on the client certificate
			// arrives after the client's side of the handshake.
			return fmt.Errorf("%s refused the client certificate of context %q in the TLS handshake: "+
				"it is revoked, or its CA is no longer accepted (aegisctl config info shows it)", strings.Join(s.endpoints, ", "), s.name)
		}

		if cause, dial := replies.TransportCause(st.Message()); dial {
			return fmt.Errorf("cannot reach %s %s: %s", plural(len(s.endpoints), "endpoint", "endpoints"),
				strings.Join(s.endpoints, ", "), cause)
		}

		if err := s.lookupError(st.Message()); err != nil {
			return err
		}
	case codes.Unimplemented:
		if err := s.notAPIDError(st.Message()); err != nil {
			return err
		}
	case codes.Unauthenticated:
		return fmt.Errorf("%s refused the client certificate of context %q: %s",
			strings.Join(s.endpoints, ", "), s.name, st.Message())
	case codes.PermissionDenied:
		return fmt.Errorf("permission denied: %s (context %q)", replies.PermissionText(st.Message()), s.name)
	}

	return errors.New(replies.DescribeStatus(st))
}

// lookupError names the endpoint whose host name does not resolve, from
// gRPC's resolver message ("dns: A record lookup error: lookup HOST on
// SERVER: no such host"); nil if msg is not about a name lookup.
func (s *session) lookupError(msg string) error {
	const dnsPrefix = "dns: "

	if strings.Contains(msg, "name resolver error") {
		return s.noAddressError(msg)
	}

	if !strings.HasPrefix(msg, dnsPrefix) {
		return nil
	}

	cause := msg
	if i := strings.Index(msg, ": lookup "); i >= 0 {
		cause = msg[i+2:]
	}

	named := s.endpoints

	if host, _, ok := strings.Cut(strings.TrimPrefix(cause, "lookup "), " "); ok {
		for _, ep := range s.endpoints {
			if endpointHost(ep) == strings.TrimSuffix(host, ":") {
				named = []string{ep}

				break
			}
		}
	}

	return fmt.Errorf("cannot reach %s %s: %s name does not resolve: %s", plural(len(named), "endpoint", "endpoints"),
		strings.Join(named, ", "), plural(len(named), "its", "their"), cause)
}

// noAddressError names the endpoints given by host name when gRPC's
// resolver found no address for them ("name resolver error: produced
// zero addresses"), which names none: an IP address always resolves.
func (s *session) noAddressError(msg string) error {
	var named []string

	for _, ep := range s.endpoints {
		if net.ParseIP(endpointHost(ep)) == nil {
			named = append(named, ep)
		}
	}

	if len(named) == 0 {
		named = s.endpoints
	}

	return fmt.Errorf("cannot reach %s %s: no address found for %s (%s): check the name and this machine's DNS, or give the node's IP address with -e",
		plural(len(named), "endpoint", "endpoints"), strings.Join(named, ", "), plural(len(named), "it", "them"), msg)
}

// notAPIDError explains an endpoint that is not apid: trustd's port, which
// answers "unknown service machine.MachineService", or another server; nil
// if the endpoints look like apid's.
func (s *session) notAPIDError(msg string) error {
	trustdPort := strconv.Itoa(wire.TrustdPort)

	for _, ep := range s.endpoints {
		if _, port, err := net.SplitHostPort(ep); err == nil && port == trustdPort {
			return fmt.Errorf("endpoint %s is trustd's port, which serves no node commands: use %s (apid, port %d)",
				ep, endpointHost(ep), wire.APIDPort)
		}
	}

	const machineService = "unknown service machine.MachineService"
	if msg == machineService {
		return fmt.Errorf("%s %s %s not serve machine.MachineService: is it apid (port %d)?", plural(len(s.endpoints), "endpoint", "endpoints"),
			strings.Join(s.endpoints, ", "), plural(len(s.endpoints), "does", "do"), wire.APIDPort)
	}

	return nil
}

// endpointHost is an endpoint without its port.
func endpointHost(ep string) string {
	if host, _, err := net.SplitHostPort(ep); err == nil {
		return host
	}

	return ep
}

// certificateTimeError says that the context's client certificate is
// expired or not yet valid, with the date and what fixes it.
func (s *session) certificateTimeError(err error) error {
	var te *renewal.CertificateTimeError
	if !errors.As(err, &te) {
		return err
	}

	if !te.Expired {
		return fmt.Errorf("context %q: %w\nCheck this machine's clock ('date -u'); the certificate's validity starts at that date", s.name, err)
	}

	return fmt.Errorf(`context %q: %w
An expired certificate cannot renew itself. With a valid admin config, make a new one and merge it:
  aegisctl --aegisconfig ADMIN-CONFIG config new NEW-FILE --roles %s
  aegisctl --aegisconfig %s config merge NEW-FILE --force`, s.name, err, strings.Join(s.cert.Subject.Organization, ","), s.path)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}

	return many
}
