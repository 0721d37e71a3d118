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
	// ServerCPU is the server's CPU time per call.
	ServerCPU time.Duration `json:"server_cpu_per_call_ns"`
	// CPU is the CPU time per call of every process involved (the
	// harness's client included), where measured.
	CPU time.Duration `json:"cpu_per_call_ns,omitempty"`
}

// PerSecond is the certificates per second at saturation.
func (s Saturated) PerSecond() float64 { return Rate(s.Calls, s.Elapsed) }

// saturatedCase is one server's call at a number of callers.
type saturatedCase struct {
	server  string
	callers int
	pid     int
	call    func(context.Context) error
	// all are every process the call makes work, whose CPU time is the
	// figure's CPU; nil leaves it unmeasured.
	all []int
}

// saturate runs trustd and both cfssl servers at each count of callers,
// interleaved in rounds, and returns trustd's, cfssl's and cfssl's with a
// certificate database figures in that order per count.
func (r *run) saturate(ctx context.Context, is issuers) ([]Saturated, error) {
	var cases []saturatedCase

	for _, n := range SaturatedCallers {
		tc, closeConns, err := is.td.multiConn(n)
		if err != nil {
			return nil, err
		}
		defer closeConns()

		cases = append(cases, saturatedCase{server: "trustd", callers: n, pid: is.td.proc.PID(), call: tc})

		for _, c := range []struct {
			name string
			srv  *cfsslServer
		}{{serverCfssl, is.cfssl}, {serverCfsslDB, is.cfsslDB}} {
			hc := &http.Client{Transport: c.srv.transport(n)}
			defer hc.CloseIdleConnections()

			cases = append(cases, saturatedCase{server: c.name, callers: n, pid: c.srv.proc.PID(),
				call: func(ctx context.Context) error { return c.srv.call(ctx, hc) }})
		}
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
			before, beforeAll := cpuTime([]int{c.pid}), cpuTime(c.all)

			done, took, err := parallel(ctx, c.callers, share, p.Budget/time.Duration(p.Rounds), c.call)
			if err != nil {
				return nil, fmt.Errorf("%s, %d callers: %w", c.server, c.callers, err)
			}

			out[i].Server, out[i].Callers = c.server, c.callers
			out[i].Calls += done
			out[i].Elapsed += took
			out[i].ServerCPU += cpuTime([]int{c.pid}) - before
			out[i].CPU += cpuTime(c.all) - beforeAll
		}
	}

	for i := range out {
		if out[i].Calls > 0 {
			out[i].ServerCPU /= time.Duration(out[i].Calls)
			out[i].CPU /= time.Duration(out[i].Calls)
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
			"trustd and both cfssl servers interleaved in rounds; rate = certificates / time, server CPU/call the server's CPU time "+
			"per certificate, compared with the in-process bound's CPU per certificate", trustdStreamsPerConn),
	}

	for _, is := range r.Issuance {
		for _, n := range SaturatedCallers {
			td, cf, db := is.saturated("trustd", n), is.saturated(serverCfssl, n), is.saturated(serverCfsslDB, n)
			bound := float64(is.Bound.CPU)

			s.Rows = append(s.Rows,
				Row{Name: fmt.Sprintf("%s: trustd, %d callers", is.KeyType, n), Rate: td.PerSecond(), ServerCPU: td.ServerCPU,
					Ratios: []Relative{
						{To: toCfsslDB, Of: OfRate, Value: Ratio(td.PerSecond(), db.PerSecond())},
						{To: toCfssl, Of: OfRate, Value: Ratio(td.PerSecond(), cf.PerSecond())},
						{To: "bound", Of: OfServerCPU, Value: Ratio(float64(td.ServerCPU), bound)},
					}},
				Row{Name: fmt.Sprintf("%s: cfssl serve authsign with certificate database, %d callers", is.KeyType, n),
					Rate: db.PerSecond(), ServerCPU: db.ServerCPU,
					Ratios: []Relative{{To: "bound", Of: OfServerCPU, Value: Ratio(float64(db.ServerCPU), bound)}}},
				Row{Name: fmt.Sprintf("%s: cfssl serve authsign, %d callers", is.KeyType, n), Rate: cf.PerSecond(), ServerCPU: cf.ServerCPU,
					Ratios: []Relative{{To: "bound", Of: OfServerCPU, Value: Ratio(float64(cf.ServerCPU), bound)}}},
			)
		}
	}

	return s
}
