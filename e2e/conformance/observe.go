package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/protobuf/types/known/emptypb"
)

// observeTimeout bounds one observation call.
const observeTimeout = 20 * time.Second

// Audit record fields and values of trustd (trustd/audit.go), as its JSON
// log carries them.
const (
	auditMsgIssued  = "certificate issued"
	auditMsgRefused = "certificate refused"
	auditSource     = "source"
	auditCode       = "code"
	auditDecision   = "decision"
	auditSerial     = "serial"
)

// auditRecord is one certificate decision of trustd's audit log.
type auditRecord map[string]any

func (a auditRecord) str(key string) string { s, _ := a[key].(string); return s }

func (a auditRecord) issued() bool { return a.str("msg") == auditMsgIssued }

// nodeState is what the cases must leave unchanged on one node.
type nodeState struct {
	// services is the ServiceList in a canonical text form: every
	// service's state, health and recorded events.
	services string
	// lastEvent is the id of the node's latest event.
	lastEvent string
	// audit is trustd's certificate decisions so far (control planes).
	audit []auditRecord
}

// snapshot is the state of several nodes, by address.
type snapshot map[string]nodeState

func (e *Env) observe(ctx context.Context, nodes []string) (snapshot, error) {
	s := snapshot{}

	for _, n := range nodes {
		st, err := e.nodeState(ctx, n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}

		s[n] = st
	}

	return s, nil
}

func (e *Env) nodeState(ctx context.Context, node string) (nodeState, error) {
	var (
		st  nodeState
		err error
	)

	if st.services, err = e.services(ctx, node); err != nil {
		return st, err
	}

	if st.lastEvent, err = e.lastEvent(ctx, node); err != nil {
		return st, err
	}

	if node != e.Worker {
		st.audit, err = e.audit(ctx, node)
	}

	return st, err
}

// compare reports every difference between two observations as a
// problem; issues certificates may have been issued.
func compare(before, after snapshot, issues int, r *Report) {
	issued := 0

	for node, b := range before {
		a := after[node]

		if a.services != b.services {
			r.Problemf("services of %s changed: %s", node, a.services)
		}

		if a.lastEvent != b.lastEvent {
			r.Problemf("new events on %s (latest id %s, was %s)", node, a.lastEvent, b.lastEvent)
		}

		if len(a.audit) < len(b.audit) {
			r.Problemf("trustd's audit log on %s lost records", node)

			continue
		}

		for _, rec := range a.audit[len(b.audit):] {
			if rec.issued() {
				issued++
			}
		}
	}

	if issued != issues {
		r.Problemf("%d certificate(s) issued, want %d", issued, issues)
	}
}

// services returns node's ServiceList in canonical text.
func (e *Env) services(ctx context.Context, node string) (string, error) {
	conn, err := e.admin(node)
	if err != nil {
		return "", err
	}

	ctx, cancel := context.WithTimeout(ctx, observeTimeout)
	defer cancel()

	resp, err := machine.NewMachineServiceClient(conn).ServiceList(ctx, &emptypb.Empty{})
	if err != nil {
		return "", fmt.Errorf("ServiceList: %w", err)
	}

	var b strings.Builder

	for _, m := range resp.GetMessages() {
		for _, s := range m.GetServices() {
			h := s.GetHealth()
			fmt.Fprintf(&b, "%s=%s healthy=%v/%v events=%d", s.GetId(), s.GetState(), h.GetHealthy(), h.GetUnknown(), len(s.GetEvents().GetEvents()))

			if ev := s.GetEvents().GetEvents(); len(ev) > 0 {
				last := ev[len(ev)-1]
				fmt.Fprintf(&b, " last=%q@%s", last.GetMsg(), last.GetTs().AsTime().Format(time.RFC3339Nano))
			}

			b.WriteString("; ")
		}
	}

	return b.String(), nil
}

// lastEvent returns the id of node's latest event: the Events stream sends
// an empty event first, then the tail asked for.
func (e *Env) lastEvent(ctx context.Context, node string) (string, error) {
	conn, err := e.admin(node)
	if err != nil {
		return "", err
	}

	ctx, cancel := context.WithTimeout(ctx, observeTimeout)
	defer cancel()

	stream, err := machine.NewMachineServiceClient(conn).Events(ctx, &machine.EventsRequest{TailEvents: 1})
	if err != nil {
		return "", fmt.Errorf("Events: %w", err)
	}

	for range 2 {
		ev, err := stream.Recv()
		if err != nil {
			return "", fmt.Errorf("Events: %w", err)
		}

		if ev.GetId() != "" {
			return ev.GetId(), nil
		}
	}

	return "", errors.New("Events: no event in the tail")
}

// audit returns the certificate decisions in node's trustd log, read
// through the Logs API. Summaries of refusals are not decisions of their
// own and are left out.
func (e *Env) audit(ctx context.Context, node string) ([]auditRecord, error) {
	recs, err := e.serviceLog(ctx, node, "trustd")

	var out []auditRecord

	for _, rec := range recs {
		if rec.str("log") != "audit" {
			continue
		}

		if m := rec.str("msg"); m == auditMsgIssued || m == auditMsgRefused {
			out = append(out, rec)
		}
	}

	return out, err
}

// serviceLog returns the JSON records of service id's log on node, read
// through the Logs API.
func (e *Env) serviceLog(ctx context.Context, node, id string) ([]auditRecord, error) {
	conn, err := e.admin(node)
	if err != nil {
		return nil, err
	}

	ctx, cancel := context.WithTimeout(ctx, observeTimeout)
	defer cancel()

	stream, err := machine.NewMachineServiceClient(conn).Logs(ctx, &machine.LogsRequest{Id: id, TailLines: -1})
	if err != nil {
		return nil, fmt.Errorf("Logs: %w", err)
	}

	var buf bytes.Buffer

	for {
		d, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}

		if err != nil {
			return nil, fmt.Errorf("Logs: %w", err)
		}

		buf.Write(d.GetBytes())
	}

	var out []auditRecord

	sc := bufio.NewScanner(&buf)
	sc.Buffer(make([]byte, 64<<10), 1<<20)

	for sc.Scan() {
		var rec auditRecord
		if json.Unmarshal(sc.Bytes(), &rec) == nil {
			out = append(out, rec)
		}
	}

	return out, sc.Err()
}

// auditFrom returns the decisions on node's trustd about callers from
// source, after the first skip records.
func (e *Env) auditFrom(ctx context.Context, node, source string, skip int) ([]auditRecord, error) {
	all, err := e.audit(ctx, node)
	if err != nil {
		return nil, err
	}

	var out []auditRecord

	for _, rec := range all[min(skip, len(all)):] {
		if rec.str(auditSource) == source {
			out = append(out, rec)
		}
	}

	return out, nil
}
