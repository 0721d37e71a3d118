package bench

import (
	"fmt"
	"strings"
	"time"
)

// Sections lays the results out as the report's tables, in the order they
// are printed. Parts that were not measured are left out.
func (r Results) Sections() []Section {
	var out []Section

	if len(r.Issuance) > 0 {
		out = append(out, r.issuanceSection())
	}

	if s := r.saturatedSection(); len(s.Rows) > 0 {
		out = append(out, s)
	}

	if r.Join != nil || r.JoinFloor != nil {
		out = append(out, r.joinSection())
	}

	if r.APID != nil {
		out = append(out, r.apidSection())
	}

	if len(r.FanOut) > 0 {
		out = append(out, r.fanOutSection())
	}

	if r.Boot != nil {
		out = append(out, r.bootSection())
	}

	if r.Flood != nil {
		out = append(out, r.connFloodSection())
	}

	if r.Streams != nil {
		out = append(out, r.streamFloodSection())
	}

	if r.Etcd != nil {
		out = append(out, r.etcdSection())
	}

	if r.TokenStores != nil {
		out = append(out, r.tokenStoresSection())
	}

	if len(r.Runtimes) > 0 {
		out = append(out, r.runtimesSection())
	}

	return out
}

func (r Results) tokenStoresSection() Section {
	ts := r.TokenStores
	rows := []Row{
		latencyRow("bbolt store (control plane before etcd is formed)", ts.Bbolt),
		latencyRow(fmt.Sprintf("etcd store (%d control planes)", ts.ControlPlanes), ts.Etcd, rateOf("bbolt", ts.Etcd, ts.Bbolt)),
	}

	if len(ts.Concurrent) == 2 {
		bolt, etcd := ts.Concurrent[0], ts.Concurrent[1]
		rows = append(rows,
			Row{Name: fmt.Sprintf("bbolt store, %d callers", bolt.Callers), Rate: bolt.PerSecond(), ServerCPU: bolt.ServerCPU},
			Row{Name: fmt.Sprintf("etcd store, %d callers", etcd.Callers), Rate: etcd.PerSecond(), ServerCPU: etcd.ServerCPU,
				Ratios: []Relative{{To: "bbolt", Of: OfRate, Value: Ratio(etcd.PerSecond(), bolt.PerSecond())}}},
		)
	}

	if j := ts.Storm; j != nil {
		rows = append(rows, Row{
			Name:    fmt.Sprintf("join storm of %d over %d control planes, one stored token", j.Clients, ts.ControlPlanes),
			Latency: &j.Latency, Total: j.Total(), Rate: Rate(j.Clients, j.Total()),
			Note: fmt.Sprintf("%d storm(s), %d attempts retried", len(j.Totals), j.Retries),
		})
	}

	return Section{
		Title: "token stores",
		How: "Certificate calls one after the other over one kept connection to a control plane's trustd, with a " +
			"limited-use stored token (each call counts a use), interleaved: etcd store of the formed cluster, bbolt " +
			"store of a control plane whose etcd is not formed; then N callers at once with the same token (one gRPC " +
			fmt.Sprintf("connection per %d callers), the stores interleaved in rounds, rate = certificates / time; ", trustdStreamsPerConn) +
			"CPU/call is trustd's and the client's (etcd's not counted), server CPU/call trustd's; the storm's clients " +
			"start on the control planes in turn",
		Rows: rows,
	}
}

func latencyRow(name string, c Case, ratios ...Relative) Row {
	return Row{Name: name, Latency: &c.Summary, Rate: c.PerSecond(), CPU: c.CPU, ServerCPU: c.ServerCPU, Ratios: ratios}
}

func rateOf(to string, a, b Case) Relative {
	return Relative{To: to, Of: OfRate, Value: Ratio(a.PerSecond(), b.PerSecond())}
}

func medianOf(to string, a, b Case) Relative {
	return Relative{To: to, Of: OfMedian, Value: Ratio(float64(a.Median), float64(b.Median))}
}

// The names the issuance ratios compare with: cfssl serve with its
// certificate database, and without.
const (
	toCfsslDB = "cfssl+db"
	toCfssl   = "cfssl"
)

func (r Results) issuanceSection() Section {
	s := Section{
		Title: "trustd issuance",
		How: "Certificate calls one after the other from one client, same CSR and key type for all; " +
			"rate = 1 / mean latency; CPU/call is the server's and the client's CPU time, server CPU/call the server's alone; " +
			"cfssl is compared in the same connection mode. " + issuanceWork,
	}

	for _, is := range r.Issuance {
		kt := is.KeyType
		s.Rows = append(s.Rows,
			latencyRow(kt+": in-process bound (parse, verify, sign)", is.Bound),
			latencyRow(kt+": trustd, one connection", is.TrustdOne, rateOf("bound", is.TrustdOne, is.Bound),
				rateOf(toCfsslDB, is.TrustdOne, is.CfsslDBOne), rateOf(toCfssl, is.TrustdOne, is.CfsslOne)),
			latencyRow(kt+": trustd, new TLS connection per call", is.TrustdNew, rateOf("bound", is.TrustdNew, is.Bound),
				rateOf(toCfsslDB, is.TrustdNew, is.CfsslDBNew), rateOf(toCfssl, is.TrustdNew, is.CfsslNew)),
			latencyRow(kt+": cfssl serve authsign with certificate database, one connection", is.CfsslDBOne,
				rateOf("bound", is.CfsslDBOne, is.Bound)),
			latencyRow(kt+": cfssl serve authsign with certificate database, new TLS connection per call", is.CfsslDBNew,
				rateOf("bound", is.CfsslDBNew, is.Bound)),
			latencyRow(kt+": cfssl serve authsign, one connection", is.CfsslOne, rateOf("bound", is.CfsslOne, is.Bound)),
			latencyRow(kt+": cfssl serve authsign, new TLS connection per call", is.CfsslNew, rateOf("bound", is.CfsslNew, is.Bound)),
		)
	}

	return s
}

func (r Results) joinSection() Section {
	var rows []Row

	for _, j := range []*JoinStorm{r.Join, r.JoinFloor} {
		if j != nil {
			rows = append(rows, r.stormRow(j))
		}
	}

	return Section{
		Title: "join storm",
		How: "client/join clients against the control plane's trustd; latency per client from the start, " +
			"total until the last certificate (median over storms), rate = clients / total; " +
			"CPU/call is the storm's CPU time per client over the control plane's processes and the harness's, " +
			"its floor that CPU time ÷ the cores",
		Rows: rows,
	}
}

// stormRow is one size of storm; with its CPU measured, the note gives
// the floor and each storm's total ÷ floor (median over storms).
func (r Results) stormRow(j *JoinStorm) Row {
	row := Row{
		Name:    fmt.Sprintf("%d clients: key, CSR, join, all at once", j.Clients),
		Latency: &j.Latency,
		Total:   j.Total(),
		Rate:    Rate(j.Clients, j.Total()),
		Note:    fmt.Sprintf("%d storm(s), %d attempts retried", len(j.Totals), j.Retries),
	}

	if floor := j.Floor(r.CPUs); floor > 0 {
		row.CPU = Summarize(j.CPU).Median / time.Duration(j.Clients)
		row.Note += fmt.Sprintf("; CPU floor %s, total ÷ floor %.2f×", formatDuration(floor), j.FloorRatio(r.CPUs))
	}

	return row
}

func (r Results) apidSection() Section {
	a := r.APID
	callers := fmt.Sprintf(", %d callers on one connection", a.Workers)
	par := func(name string, c Saturated, ratios ...Relative) Row {
		return Row{Name: name + callers, Rate: c.PerSecond(), CPU: c.CPU, ServerCPU: c.ServerCPU, Ratios: ratios}
	}
	parRate := func(to string, x, y Saturated) Relative {
		return Relative{To: to, Of: OfRate, Value: Ratio(x.PerSecond(), y.PerSecond())}
	}

	return Section{
		Title: "apid",
		How: "Version on the control plane: straight to machined's Unix socket with talos-role os:admin; through the " +
			"bare proxy (github.com/siderolabs/grpc-proxy v0.5.1 over mTLS, raw frames and metadata forwarded to the " +
			"same socket, no authorization, routing or logging: apid's floor); through apid over mTLS; the three " +
			"interleaved, calls one after the other, then parallel callers; CPU/call is the client's, the hop's and " +
			"machined's CPU time, server CPU/call the hop's alone (machined's for the direct call)",
		Rows: []Row{
			latencyRow(directName, a.Direct),
			latencyRow(proxyName, a.Proxy, medianOf("direct", a.Proxy, a.Direct)),
			latencyRow(viaName, a.Via, medianOf(toFloor, a.Via, a.Proxy), medianOf("direct", a.Via, a.Direct)),
			par(directName, a.DirectParallel),
			par(proxyName, a.ProxyParallel, parRate("direct", a.ProxyParallel, a.DirectParallel)),
			par(viaName, a.ViaParallel, parRate(toFloor, a.ViaParallel, a.ProxyParallel), parRate("direct", a.ViaParallel, a.DirectParallel)),
			latencyRow("new mTLS connection, handshake to first HTTP/2 frame", a.Handshake),
		},
	}
}

// The rows of the apid section, and the name its ratios give the bare
// proxy.
const (
	directName = "Version straight to machined's socket"
	proxyName  = "Version through the bare proxy (floor)"
	viaName    = "Version through apid"
	toFloor    = "floor"
)

func (r Results) fanOutSection() Section {
	s := Section{
		Title: "fan-out",
		How: "Version with nodes=N through the control plane's apid, calls one after the other; ratio to nodes=1; " +
			"CPU/call is the CPU time of every node's processes and the client's (on one machine no call can take " +
			"less than CPU/call divided by the cores), server CPU/call the entry apid's alone",
	}

	one := r.FanOut[0]
	for _, f := range r.FanOut {
		row := latencyRow(fmt.Sprintf("nodes=%d", f.Nodes), f.Latency)
		if f.Nodes != one.Nodes {
			row.Ratios = []Relative{medianOf(fmt.Sprintf("nodes=%d", one.Nodes), f.Latency, one.Latency)}
		}

		s.Rows = append(s.Rows, row)
	}

	return s
}

func (r Results) bootSection() Section {
	b := r.Boot
	rows := []Row{
		{Name: "control plane: machined start to node ready", Latency: &b.ControlPlane},
		{Name: "worker, joining: machined start to node ready", Latency: &b.Worker},
	}

	if b.ClusterNodes > 0 {
		rows = append(rows, Row{
			Name:  fmt.Sprintf("cluster of %d nodes started at once: all services up", b.ClusterNodes),
			Total: b.ClusterUp,
		})
	}

	return Section{
		Title: "boot",
		How: "a fresh one-node cluster, then a worker started once it is up; from the process's start " +
			"(/proc) to machined's \"node ready\" (every service running and healthy)",
		Rows: rows,
	}
}

func (r Results) etcdSection() Section {
	e := r.Etcd

	rss := make([]string, len(e.IdleRSS))
	for i, b := range e.IdleRSS {
		rss[i] = formatMiB(b)
	}

	return Section{
		Title: "etcd",
		How: "cluster create from its call until every control plane votes and every service is up; one control plane " +
			"from machined's start (/proc) to etcd healthy, bootstrapped once ready; snapshot through apid into a file; " +
			"restore = EtcdRecover + Bootstrap with recover on a fresh control plane until its etcd serves the keys",
		Rows: []Row{
			{Name: fmt.Sprintf("cluster create, %d control planes + %d workers: all voters healthy", e.ControlPlanes, e.Workers), Total: e.ClusterUp},
			{Name: "one control plane: start to etcd healthy", Total: e.SingleUp},
			{Name: "etcd idle RSS per control plane", Note: strings.Join(rss, ", ")},
			{Name: fmt.Sprintf("snapshot of %d keys", e.Keys), Total: e.Snapshot, Note: formatMiB(uint64(e.SnapshotBytes))},
			{Name: fmt.Sprintf("restore of %d keys into a new control plane", e.Keys), Total: e.Restore},
		},
	}
}

func (r Results) runtimesSection() Section {
	ref := r.Runtimes[0]

	var rows []Row

	for i, f := range r.Runtimes {
		fresh, restart := "fresh node", "restarted"
		if f.Runtime == "containerd" {
			fresh, restart = "cold (fresh node: images imported)", "warm (restarted: images present)"
		}

		freshRow := Row{Name: f.Runtime + ": control plane " + fresh + ", start to node ready", Latency: &f.Fresh}
		restartRow := Row{Name: f.Runtime + ": control plane " + restart + ", start to node ready", Latency: &f.Restart}

		if i > 0 {
			freshRow.Ratios = []Relative{{To: ref.Runtime, Of: OfMedian, Value: Ratio(float64(f.Fresh.Median), float64(ref.Fresh.Median))}}
			restartRow.Ratios = []Relative{{To: ref.Runtime, Of: OfMedian, Value: Ratio(float64(f.Restart.Median), float64(ref.Restart.Median))}}
		}

		rows = append(rows, freshRow, restartRow)
	}

	for i, f := range r.Runtimes {
		if f.Nodes == 0 {
			continue
		}

		direct := latencyRow(f.Runtime+": Version straight to machined's socket", f.Direct)
		via := latencyRow(f.Runtime+": Version through apid", f.Via, medianOf("direct", f.Via, f.Direct))

		if i > 0 && ref.Nodes > 0 {
			direct.Ratios = append(direct.Ratios, medianOf(ref.Runtime, f.Direct, ref.Direct))
			via.Ratios = append(via.Ratios, medianOf(ref.Runtime, f.Via, ref.Via))
		}

		rows = append(rows, direct, via)

		for _, fo := range f.FanOut {
			row := latencyRow(fmt.Sprintf("%s: fan-out, nodes=%d of %d", f.Runtime, fo.Nodes, f.Nodes), fo.Latency)
			if one := f.FanOut[0]; fo.Nodes != one.Nodes {
				row.Ratios = append(row.Ratios, medianOf(fmt.Sprintf("nodes=%d", one.Nodes), fo.Latency, one.Latency))
			}

			if i > 0 {
				if refFo, ok := ref.fanOut(fo.Nodes); ok {
					row.Ratios = append(row.Ratios, medianOf(ref.Runtime, fo.Latency, refFo.Latency))
				}
			}

			rows = append(rows, row)
		}
	}

	return Section{
		Title: "runtimes",
		How: "the process runtime (services as machined's children) against the containerd runtime (services as " +
			"confined containers of the node's own containerd), in the same run: one-node clusters from machined's start " +
			"(/proc) to \"node ready\", fresh (containerd empty: every image imported) and restarted with the state kept " +
			"(images present), interleaved; then on a cluster of each runtime, Version straight to machined and through " +
			"apid and fanned out, as above; CPU/call counts every node's processes (containerd and the shims too); " +
			"memory in the memory table",
		Rows: rows,
	}
}

// fanOut is the fan-out to n nodes; false if not measured.
func (f RuntimeFigures) fanOut(n int) (FanOut, bool) {
	for _, fo := range f.FanOut {
		if fo.Nodes == n {
			return fo, true
		}
	}

	return FanOut{}, false
}
