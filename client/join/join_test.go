package join_test

import (
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aegis-os/aegis/authz/role"
	"github.com/aegis-os/aegis/ca"
	"github.com/aegis-os/aegis/ca/catest"
	"github.com/aegis-os/aegis/client/join"
	"github.com/aegis-os/aegis/client/spread"
	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/logtest"
	"github.com/aegis-os/aegis/internal/testutil"
	"github.com/aegis-os/aegis/token"
)

// call is one request the fake transport hands to the test.
type call struct {
	endpoint string
	csr      *ca.CSR
	reply    chan reply
}

type reply struct {
	caPEM, crtPEM []byte
	err           error
}

// fakeTransport passes each call to the test and returns its answer.
type fakeTransport struct{ calls chan call }

func (f fakeTransport) Certificate(ctx context.Context, endpoint string, _ token.Token, csrPEM []byte) ([]byte, []byte, error) {
	csr, err := ca.ParseCSR(csrPEM)
	if err != nil {
		return nil, nil, err
	}

	c := call{endpoint: endpoint, csr: csr, reply: make(chan reply, 1)}

	select {
	case f.calls <- c:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}

	r := <-c.reply

	return r.caPEM, r.crtPEM, r.err
}

type harness struct {
	t      *testing.T
	ca     *ca.CA
	iss    *ca.Issuer
	clk    *clock.Fake
	calls  chan call
	client *join.Client
	logs   *logtest.Sink
}

func newHarness(t *testing.T, kt ca.KeyType, maxAttempts int, endpoints ...string) *harness {
	t.Helper()

	authority := catest.NewCA(t, kt, testutil.Epoch)
	cas, err := ca.NewAcceptedSet(testutil.Epoch, authority.Cert)
	if err != nil {
		t.Fatal(err)
	}

	tok, _ := token.Parse("abcdef.0123456789abcdef")
	h := &harness{
		t: t, ca: authority, iss: catest.NewIssuer(t, authority, testutil.Epoch), clk: clock.NewFake(testutil.Epoch),
		calls: make(chan call), logs: &logtest.Sink{},
	}

	h.client, err = join.New(join.Config{
		Endpoints:   endpoints,
		Token:       tok,
		CAs:         cas,
		CA:          authority.Cert,
		Hostname:    "worker-1",
		SANs:        []string{"10.5.0.3", "worker-1", "worker-1.example"},
		MaxAttempts: maxAttempts,
		RetryMin:    2 * time.Second,
		RetryMax:    8 * time.Second,
		Transport:   fakeTransport{calls: h.calls},
		Clock:       h.clk,
		Rand:        testutil.ZeroRand{},
		Logger:      h.logs.Logger(),
	})
	if err != nil {
		t.Fatal(err)
	}

	return h
}

// join runs Join in the background and returns where its result lands.
func (h *harness) join(ctx context.Context) <-chan joinResult {
	out := make(chan joinResult, 1)

	go func() {
		res, err := h.client.Join(ctx)
		out <- joinResult{res, err}
	}()

	return out
}

type joinResult struct {
	res *join.Result
	err error
}

func (h *harness) nextCall() call {
	h.t.Helper()

	select {
	case c := <-h.calls:
		return c
	case <-time.After(time.Minute):
		h.t.Fatal("no call made")

		return call{}
	}
}

// sign answers a call with a real certificate for its CSR.
func (h *harness) sign(c call) {
	h.t.Helper()

	issued, err := h.iss.Issue(ca.Request{CSR: c.csr, Profile: ca.ProfileServer})
	if err != nil {
		h.t.Fatal(err)
	}

	c.reply <- reply{caPEM: h.ca.CertPEM, crtPEM: issued.PEM}
}

func (h *harness) waitTimer() {
	h.t.Helper()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if err := h.clk.WaitForTimers(ctx, 1); err != nil {
		h.t.Fatalf("no backoff timer armed: %v", err)
	}
}

func TestJoin(t *testing.T) {
	for _, kt := range ca.KeyTypes() {
		t.Run(string(kt), func(t *testing.T) {
			h := newHarness(t, kt, 0, "cp-1")
			done := h.join(context.Background())

			c := h.nextCall()
			if c.endpoint != "cp-1:50001" {
				t.Fatalf("endpoint %q, want the default trustd port", c.endpoint)
			}

			req := c.csr.Request
			if got, _ := ca.KeyTypeOf(req.PublicKey); got != kt {
				t.Fatalf("node key %s, want the CA's type %s", got, kt)
			}

			if req.Subject.CommonName != "worker-1" || !slices.Equal(c.csr.Hosts(), []string{"worker-1", "worker-1.example", "10.5.0.3"}) {
				t.Fatalf("CSR names: CN %q, hosts %v", req.Subject.CommonName, c.csr.Hosts())
			}

			h.sign(c)

			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}

			if !r.res.Key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(r.res.Certificate.PublicKey) {
				t.Fatal("result key does not match the certificate")
			}

			if len(r.res.KeyPEM) == 0 || len(r.res.CertPEM) == 0 || r.res.CAs == nil || r.res.Endpoint != "cp-1:50001" {
				t.Fatalf("incomplete result: %+v", r.res)
			}
		})
	}
}

// TestRoundRobinBackoff: failed calls move to the next endpoint after a
// growing, capped delay; the same CSR is sent each time.
func TestRoundRobinBackoff(t *testing.T) {
	h := newHarness(t, ca.Ed25519, 0, "cp-1", "cp-2:6000", "fd00::1")
	done := h.join(context.Background())

	wantEndpoints := []string{"cp-1:50001", "cp-2:6000", "[fd00::1]:50001", "cp-1:50001", "cp-2:6000"}
	// Delays before attempts 2..5 without jitter: half of 2s, 4s, 8s, then capped at 8s.
	waits := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second}

	var firstCSR []byte

	for i, want := range wantEndpoints {
		if i > 0 {
			h.waitTimer()
			h.clk.Advance(waits[i-1] - time.Millisecond)

			select {
			case c := <-h.calls:
				t.Fatalf("attempt %d made before its delay, to %s", i+1, c.endpoint)
			default:
			}

			h.clk.Advance(time.Millisecond)
		}

		c := h.nextCall()
		if c.endpoint != want {
			t.Fatalf("attempt %d to %s, want %s", i+1, c.endpoint, want)
		}

		if firstCSR == nil {
			firstCSR = c.csr.PEM
		} else if string(c.csr.PEM) != string(firstCSR) {
			t.Fatal("CSR changed between attempts")
		}

		if i < len(wantEndpoints)-1 {
			c.reply <- reply{err: status.Error(codes.Unavailable, "connection refused")}
		} else {
			h.sign(c)
		}
	}

	if r := <-done; r.err != nil {
		t.Fatal(r.err)
	}
}

func TestJoinStops(t *testing.T) {
	tests := []struct {
		name        string
		maxAttempts int
		replies     []error
		wantRefused bool
	}{
		{name: "CSR refused", replies: []error{status.Error(codes.InvalidArgument, "wildcard")}, wantRefused: true},
		{name: "attempts used up", maxAttempts: 2, replies: []error{status.Error(codes.Unauthenticated, "invalid token"), status.Error(codes.FailedPrecondition, "time not synced")}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, ca.Ed25519, tt.maxAttempts, "cp-1", "cp-2")
			done := h.join(context.Background())

			for i, err := range tt.replies {
				if i > 0 {
					h.waitTimer()
					h.clk.Advance(time.Minute)
				}

				h.nextCall().reply <- reply{err: err}
			}

			r := <-done
			if r.err == nil || errors.Is(r.err, join.ErrRefused) != tt.wantRefused {
				t.Fatalf("err = %v, want refused=%v", r.err, tt.wantRefused)
			}
		})
	}
}

func TestJoinCancelDuringBackoff(t *testing.T) {
	h := newHarness(t, ca.Ed25519, 0, "cp-1")
	ctx, cancel := context.WithCancel(context.Background())
	done := h.join(ctx)

	h.nextCall().reply <- reply{err: errors.New("unreachable")}
	h.waitTimer()
	cancel()

	if r := <-done; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", r.err)
	}
}

// TestJoinRejectsBadAnswers: an answer that is not a server certificate for
// the node's key, chaining both to the CAs sent with it and to those the
// node already trusts, counts as a failure and
// the next endpoint is tried.
func TestJoinRejectsBadAnswers(t *testing.T) {
	h := newHarness(t, ca.Ed25519, 0, "cp-1", "cp-2")
	other := catest.NewCA(t, ca.Ed25519, testutil.Epoch)
	done := h.join(context.Background())

	issue := func(c call, p ca.Profile, roles ...role.Role) []byte {
		issued, err := h.iss.Issue(ca.Request{CSR: c.csr, Profile: p, Roles: role.NewSet(roles...)})
		if err != nil {
			t.Fatal(err)
		}

		return issued.PEM
	}

	bad := []struct {
		name  string
		reply func(call) reply
	}{
		{"another key", func(call) reply {
			return reply{caPEM: h.ca.CertPEM, crtPEM: catest.Issue(t, h.iss, catest.Key(t, ca.Ed25519), ca.ProfileServer, 0).PEM}
		}},
		{"junk certificate", func(call) reply { return reply{caPEM: h.ca.CertPEM, crtPEM: []byte("junk")} }},
		{"junk CA bundle", func(c call) reply { return reply{caPEM: []byte("junk"), crtPEM: issue(c, ca.ProfileServer)} }},
		{"client certificate", func(c call) reply { return reply{caPEM: h.ca.CertPEM, crtPEM: issue(c, ca.ProfileClient, role.Reader)} }},
		{"CA bundle of another CA", func(c call) reply { return reply{caPEM: other.CertPEM, crtPEM: issue(c, ca.ProfileServer)} }},
		{"signed by another CA the reply names", func(c call) reply {
			issued, err := catest.NewIssuer(t, other, testutil.Epoch).Issue(ca.Request{CSR: c.csr, Profile: ca.ProfileServer})
			if err != nil {
				t.Fatal(err)
			}

			return reply{caPEM: other.CertPEM, crtPEM: issued.PEM}
		}},
	}

	for i, b := range bad {
		if i > 0 {
			h.waitTimer()
			h.clk.Advance(time.Minute)
		}

		c := h.nextCall()
		c.reply <- b.reply(c)
	}

	h.waitTimer()
	h.clk.Advance(time.Minute)
	h.sign(h.nextCall())

	if r := <-done; r.err != nil || r.res.Certificate.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		t.Fatalf("join after bad answers: %v", r.err)
	}
}

func TestNewRefusals(t *testing.T) {
	authority := catest.NewCA(t, ca.Ed25519, testutil.Epoch)
	cas, _ := ca.NewAcceptedSet(testutil.Epoch, authority.Cert)
	tok, _ := token.Parse("abcdef.0123456789abcdef")

	tests := []struct {
		name string
		cfg  join.Config
	}{
		{name: "no endpoints", cfg: join.Config{Token: tok, CAs: cas, CA: authority.Cert}},
		{name: "no token", cfg: join.Config{Endpoints: []string{"a"}, CAs: cas, CA: authority.Cert}},
		{name: "no CAs", cfg: join.Config{Endpoints: []string{"a"}, Token: tok}},
		{name: "negative attempts", cfg: join.Config{Endpoints: []string{"a"}, Token: tok, CAs: cas, CA: authority.Cert, MaxAttempts: -1}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := join.New(tt.cfg); err == nil {
				t.Fatal("New accepted the config")
			}
		})
	}
}

// TestTokenRefusedBacksOffLongAndSaysWhy: a token trustd refuses does not
// heal by asking again, so the delays grow past RetryMax up to
// RefusedRetryMax, each refusal is logged as an error that says what to
// do, and a token made valid meanwhile is taken at the next call.
func TestTokenRefusedBacksOffLongAndSaysWhy(t *testing.T) {
	h := newHarness(t, ca.Ed25519, 0, "cp-1")
	done := h.join(context.Background())

	// Without jitter: half of 2s, 4s, 8s, 16s, …, up to half of five minutes.
	waits := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second}

	for i := 0; ; i++ {
		c := h.nextCall()
		if i == len(waits) {
			h.sign(c)

			break
		}

		c.reply <- reply{err: status.Error(codes.Unauthenticated, "trustd: token expired")}

		h.waitTimer()
		h.clk.Advance(waits[i] - time.Millisecond)

		select {
		case c := <-h.calls:
			t.Fatalf("attempt %d made before %s, to %s", i+2, waits[i], c.endpoint)
		default:
		}

		h.clk.Advance(time.Millisecond)
	}

	if r := <-done; r.err != nil {
		t.Fatal(r.err)
	}

	recs := h.logs.Records(t)
	if len(recs) != len(waits) {
		t.Fatalf("%d records for %d refusals:\n%s", len(recs), len(waits), h.logs.String())
	}

	for _, r := range recs {
		if r["msg"] != join.MsgTokenRefused || r["level"] != "ERROR" ||
			r["error"] != join.ErrTokenRefused.Error()+" (cp-1:50001: trustd: token expired)" {
			t.Fatalf("refusal logged as %v", r)
		}
	}
}

// TestTokenRefusalKeepsItsCode: a caller that asks for the gRPC code of a
// join refused for its token gets trustd's Unauthenticated.
func TestTokenRefusalKeepsItsCode(t *testing.T) {
	h := newHarness(t, ca.Ed25519, 1, "cp-1")
	done := h.join(context.Background())

	h.nextCall().reply <- reply{err: status.Error(codes.Unauthenticated, "trustd: invalid token")}

	r := <-done
	if status.Code(r.err) != codes.Unauthenticated || !errors.Is(r.err, join.ErrTokenRefused) {
		t.Fatalf("join: %v (code %s), want Unauthenticated and ErrTokenRefused", r.err, status.Code(r.err))
	}
}

// TestJoinGoesFirstToTheNodesOwnControlPlane: with a Source, a node joins
// first through the control plane client/spread prefers for it, the one
// its later calls keep to, and then through the others in that order.
func TestJoinGoesFirstToTheNodesOwnControlPlane(t *testing.T) {
	authority := catest.NewCA(t, ca.Ed25519, testutil.Epoch)

	cas, err := ca.NewAcceptedSet(testutil.Epoch, authority.Cert)
	if err != nil {
		t.Fatal(err)
	}

	tok, _ := token.Parse("abcdef.0123456789abcdef")
	endpoints := []string{"10.5.0.2:50001", "10.5.0.3:50001", "10.5.0.4:50001"}

	for _, source := range []string{"10.6.0.1", "10.6.0.2", "10.6.0.3", "10.6.0.4"} {
		calls := make(chan call)
		c, err := join.New(join.Config{
			Endpoints: endpoints, Token: tok, CAs: cas, CA: authority.Cert, Hostname: source, Source: source,
			MaxAttempts: 1, Transport: fakeTransport{calls: calls}, Clock: clock.NewFake(testutil.Epoch), Rand: testutil.ZeroRand{},
		})
		if err != nil {
			t.Fatal(err)
		}

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})

		go func() { defer close(done); _, _ = c.Join(ctx) }()

		got := <-calls
		cancel()
		got.reply <- reply{err: errors.New("refused")}
		<-done

		if want := endpoints[spread.Preference([]byte(source), endpoints)[0]]; got.endpoint != want {
			t.Errorf("node %s joined first through %s, want %s", source, got.endpoint, want)
		}
	}
}
