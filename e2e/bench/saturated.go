package bench

import (
	"context"
	"fmt"
	"net/http"
	"time"

	securityapi "github.com/siderolabs/talos/pkg/machinery/api/security"
)

// SaturatedCallers are the callers of the saturated issuance cases.
var SaturatedCallers = []int{8, 32}

// trustdStreamsPerConn is how many of the saturated callers share one
// kept gRPC connection to trustd: a source may hold 32 connections and 16
// calls in flight on each (trustd/limits.go), so 32 callers need 8
// connections and stay well inside both bounds. cfssl serve speaks
// HTTP/1.1, one call in flight per connection: each of its callers keeps
// a connection of its own.
const trustdStreamsPerConn = 4

// Saturated is one server under callers callers at once, each calling
// again as soon as its answer is in, over kept connections.
type Saturated struct {
	Server  string        `json:"server"`
	Callers int           `json:"callers"`
	Calls   int           `json:"calls"`
	Elapsed time.Duration `json:"elapsed_ns"`
	// ServerCPU is the server's CPU time per certificate.
	ServerCPU time.Duration `json:"server_cpu_per_call_ns"`
}

// PerSecond is the certificates per second at saturation.
func (s Saturated) PerSecond() float64 { return Rate(s.Calls, s.Elapsed) }

// saturatedCase is one server's call at a number of callers.
type saturatedCase struct {
	server  string
	callers int
	pid     int
	call    func(context.Context) error
}

// saturate runs trustd and cfssl serve at each count of callers,
// interleaved in rounds, and returns trustd's and cfssl's figures in that
// order per count.
func (r *run) saturate(ctx context.Context, td *trustdServer, cf *cfsslServer) ([]Saturated, error) {
	var cases []saturatedCase

	for _, n := range SaturatedCallers {
		tc, closeConns, err := td.multiConn(n)
		if err != nil {
			return nil, err
		}
		defer closeConns()

		hc := &http.Client{Transport: cf.transport(n)}
		defer hc.CloseIdleConnections()

		cases = append(cases,
			saturatedCase{"trustd", n, td.proc.PID(), tc},
			saturatedCase{"cfssl serve", n, cf.proc.PID(), func(ctx context.Context) error { return cf.call(ctx, hc) }})
	}

	return interleaveParallel(ctx, r.plan, r.plan.SaturatedCalls, cases)
}

// interleaveParallel runs calls calls of each case with its callers at
// once, the cases interleaved in the plan's rounds, so that a change in the
// machine's load falls on all of them alike.
func interleaveParallel(ctx context.Context, p Plan, calls int, cases []saturatedCase) ([]Saturated, error) {
	out := make([]Saturated, len(cases))

	for round := range p.Rounds {
		for i, c := range cases {
			share := calls*(round+1)/p.Rounds - calls*round/p.Rounds
			before := cpuTime([]int{c.pid})

			done, took, err := parallel(ctx, c.callers, share, p.Budget/time.Duration(p.Rounds), c.call)
			if err != nil {
				return nil, fmt.Errorf("%s, %d callers: %w", c.server, c.callers, err)
			}

			out[i].Server, out[i].Callers = c.server, c.callers
			out[i].Calls += done
			out[i].Elapsed += took
			out[i].ServerCPU += cpuTime([]int{c.pid}) - before
		}
	}

	for i := range out {
		if out[i].Calls > 0 {
			out[i].ServerCPU /= time.Duration(out[i].Calls)
		}
	}

	return out, nil
}

// multiConn is a call over n/trustdStreamsPerConn kept connections, the
// callers taking them in turn.
func (t *trustdServer) multiConn(callers int) (func(context.Context) error, func(), error) {
	conns := make([]*trustdServer, 0, (callers+trustdStreamsPerConn-1)/trustdStreamsPerConn)
	closeAll := func() {
		for _, c := range conns {
			c.conn.Close() //nolint:errcheck // client connections
		}
	}

	for range cap(conns) {
		c := &trustdServer{addr: t.addr, tok: t.tok, csr: t.csr}
		if err := c.dial(t.cas, t.serverName); err != nil {
			closeAll()

			return nil, nil, err
		}

		conns = append(conns, c)
	}

	clients := make(chan securityapi.SecurityServiceClient, callers)
	for i := range callers {
		clients <- conns[i%len(conns)].one
	}

	call := func(ctx context.Context) error {
		// A caller keeps the connection it took for its next call.
		c := <-clients
		defer func() { clients <- c }()

		return (&trustdServer{one: c, tok: t.tok, csr: t.csr}).callOne(ctx)
	}

	return call, closeAll, nil
}

// transport keeps a connection per caller, as many as callers.
func (c *cfsslServer) transport(callers int) *http.Transport {
	return &http.Transport{TLSClientConfig: c.tls, MaxIdleConnsPerHost: callers, MaxConnsPerHost: callers}
}

func (r Results) saturatedSection() Section {
	s := Section{
		Title: "trustd issuance at saturation",
		How: fmt.Sprintf("N callers at once, each calling again as soon as its certificate is in, over kept connections "+
			"(trustd: one gRPC connection per %d callers; cfssl serve: one HTTP/1.1 connection per caller), "+
			"trustd and cfssl interleaved in rounds; rate = certificates / time, server CPU/call the server's CPU time "+
			"per certificate, compared with the in-process bound's CPU per certificate", trustdStreamsPerConn),
	}

	for _, is := range r.Issuance {
		for _, n := range SaturatedCallers {
			td, cf := is.saturated("trustd", n), is.saturated("cfssl serve", n)
			bound := float64(is.Bound.CPU)

			s.Rows = append(s.Rows,
				Row{Name: fmt.Sprintf("%s: trustd, %d callers", is.KeyType, n), Rate: td.PerSecond(), ServerCPU: td.ServerCPU,
					Ratios: []Relative{
						{To: "cfssl", Of: OfRate, Value: Ratio(td.PerSecond(), cf.PerSecond())},
						{To: "bound", Of: OfServerCPU, Value: Ratio(float64(td.ServerCPU), bound)},
					}},
				Row{Name: fmt.Sprintf("%s: cfssl serve authsign, %d callers", is.KeyType, n), Rate: cf.PerSecond(), ServerCPU: cf.ServerCPU,
					Ratios: []Relative{{To: "bound", Of: OfServerCPU, Value: Ratio(float64(cf.ServerCPU), bound)}}},
			)
		}
	}

	return s
}
