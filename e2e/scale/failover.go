package scale

import (
	"context"
	"os"
	"runtime"
	"slices"
	"time"
)

// failover kills the first control plane (the one every worker's client
// asks first) under the workers, restarts it, and measures from the kill
// until every worker had a call to trustd answered again, and the calls
// and renewals that failed meanwhile.
func (r *run) failover(ctx context.Context) error {
	cp := r.c.ControlPlanes()[0]

	collect()

	calls0, renew0, causes0 := r.fleet.n.failed.Load(), r.fleet.n.renewFailed.Load(), r.fleet.n.causes.snapshot()
	lost0 := r.fleet.n.lost.Load()
	procs0, self := controlPlaneProcesses(r.c), os.Getpid()
	cpu0, self0 := cpuByName(procs0), cpuOf(self)
	t0 := time.Now()

	for _, w := range r.fleet.workers {
		w.caller.mark(t0)
	}

	if err := r.c.Kill(cp.Name); err != nil {
		return err
	}

	if _, err := r.c.StartNode(ctx, cp.Name, clusterTimeout); err != nil {
		return err
	}

	r.res.Failover.Restart = time.Since(t0)
	r.res.Failover.Served, r.res.Failover.Unserved = r.waitServed(ctx, t0)
	r.res.Failover.CPU = cpuSince(procs0, cpu0, controlPlaneProcesses(r.c))
	r.res.Failover.HarnessCPU = max(cpuOf(self)-self0, 0)
	r.res.Failover.Floor = CPUFloor(r.res.Failover.CPU, r.res.Failover.HarnessCPU, runtime.NumCPU())
	r.res.Failover.Waited, r.res.Failover.WaitP50, r.res.Failover.WaitP99, r.res.Failover.Waiters = r.waits()
	r.res.Failover.FailedCalls = r.fleet.n.failed.Load() - calls0
	r.res.Failover.FailedRenew = r.fleet.n.renewFailed.Load() - renew0
	r.res.Failover.LostStreams = r.fleet.n.lost.Load() - lost0
	r.res.Failover.Causes = topCauses(causes0, r.fleet.n.causes.snapshot(), time.Since(t0).Seconds(), 5)
	r.logf("control plane killed: up in %s, every worker served in %s (%d not), the longest wait %s, %d failed calls",
		dur(r.res.Failover.Restart), dur(r.res.Failover.Served), r.res.Failover.Unserved, dur(r.res.Failover.Waited), r.res.Failover.FailedCalls)

	return nil
}

// collect runs the harness's garbage collector before a timed stage. The
// hollow workers share one heap of gigabytes, where each node's machined
// has a heap of its own of a few MiB; a collection of it takes seconds of
// CPU on the cores the control planes share, and one that falls within a
// stage's few seconds by chance slows the control planes for a cost no
// cluster has. Collected before, the next one is gigabytes of allocation
// away (GOGC 400).
func collect() { runtime.GC() }

// waitServed waits until every worker had a call answered after t0, or
// has its entry held by a control plane on a connection still open, or
// servedTimeout; it returns the time from t0 to the last worker's first
// answer and how many had none. A unary call is answered when it returns,
// a stream (the revocation watch) at each message it brings; a worker
// held throughout counts from the first look after the restart. The
// figure is the outage as the workers see it, to within a heartbeat
// interval.
func (r *run) waitServed(ctx context.Context, t0 time.Time) (time.Duration, int) {
	deadline := t0.Add(servedTimeout)

	first := make([]time.Time, len(r.fleet.workers))

	for {
		unserved := 0

		for i, w := range r.fleet.workers {
			switch at := time.Unix(0, w.caller.last.Load()); {
			case !first[i].IsZero():
			case !at.Before(t0):
				first[i] = at
			case w.sender.Held(nil):
				// Its entry held on a connection that outlived the
				// kill: served throughout, seen now.
				first[i] = time.Now()
			}

			if first[i].IsZero() {
				unserved++
			}
		}

		if unserved == 0 {
			return slices.MaxFunc(first, time.Time.Compare).Sub(t0), 0
		}

		if time.Now().After(deadline) || !sleep(ctx, 200*time.Millisecond) {
			return 0, unserved
		}
	}
}

// waits are how long the workers waited, after the kill, from the start
// of their first call to their first answer: the longest, half of them
// and 99 % within, and how many workers called. The time from the kill to
// a worker's first answer (waitServed) also counts the time the worker
// made no call: up to a heartbeat interval, whatever the outage, once the
// workers' heartbeats are spread over the interval as a cluster's are.
func (r *run) waits() (longest, p50, p99 time.Duration, n int) {
	var all []time.Duration

	for _, w := range r.fleet.workers {
		if d, ok := w.caller.waited(); ok {
			all = append(all, d)
		}
	}

	if len(all) == 0 {
		return 0, 0, 0, 0
	}

	slices.Sort(all)

	at := func(q float64) time.Duration { return all[min(len(all)-1, int(q*float64(len(all))))] }

	return all[len(all)-1], at(0.50), at(0.99), len(all)
}

// cpuSince is the CPU time the control-plane processes now running used
// since before was read of those running then: a process started since
// (the control plane restarted) counts whole.
func cpuSince(procs0 map[string]int, before map[string]time.Duration, now map[string]int) time.Duration {
	var t time.Duration

	for name, pid := range now {
		used := cpuOf(pid)
		if procs0[name] == pid {
			used -= before[name]
		}

		t += max(used, 0)
	}

	return t
}
