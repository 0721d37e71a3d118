package machineapi

import (
	"errors"
	"strconv"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/aegis-os/aegis/machined/system/events"
)

// eventTypePrefix is the type URL prefix Talos clients expect on event payloads.
const eventTypePrefix = "talos/runtime/"

// Logs streams a service's log: the last TailLines lines (all when
// negative), then, with Follow, new output as it is written. A log the
// node does not have is NotFound, in Talos's words (clients and Talos's
// own tests match them).
func (s *Server) Logs(req *machine.LogsRequest, stream grpc.ServerStreamingServer[common.Data]) error {
	l, ok := s.cfg.Logs.ServiceLog(req.GetId())
	if !ok {
		return s.toStatus("Logs", refusef(ErrNotFound, "log %q was not registered", req.GetId()))
	}

	from, to, err := l.Tail(int(req.GetTailLines()))
	if err != nil {
		return s.toStatus("Logs", err)
	}

	send := func(b []byte) error { return stream.Send(&common.Data{Bytes: b}) }

	ctx := stream.Context()

	if err = l.Copy(ctx, from, to, send); err == nil && req.GetFollow() {
		err = l.Follow(ctx, to, send)
	}

	if ctx.Err() != nil {
		return nil
	}

	return s.toStatus("Logs", err)
}

// Events streams node events: first an empty event (newer Talos clients
// wait for it as the sign the watch is set up), then the events the tail
// options select, then every new event until the caller goes away.
func (s *Server) Events(req *machine.EventsRequest, stream grpc.ServerStreamingServer[machine.Event]) error {
	if err := stream.Send(&machine.Event{}); err != nil {
		return err
	}

	bus := s.cfg.Bus
	from := bus.NextSeq()

	switch {
	case req.GetTailId() != "":
		seq, err := strconv.ParseUint(req.GetTailId(), 10, 64)
		if err != nil {
			return s.toStatus("Events", refusef(ErrBadRequest, "tail_id %q is not an event id", req.GetTailId()))
		}

		from = seq + 1
	case req.GetTailSeconds() > 0:
		from = firstSince(bus, s.cfg.Clock.Now().Add(-time.Duration(req.GetTailSeconds())*time.Second), from)
	case req.GetTailEvents() != 0:
		if tail := bus.Tail(int(req.GetTailEvents())); len(tail) > 0 {
			from = tail[0].Seq
		}
	}

	return s.follow(req, stream, bus.Subscribe(from))
}

func (s *Server) follow(req *machine.EventsRequest, stream grpc.ServerStreamingServer[machine.Event], sub *events.Subscription) error {
	for {
		ev, err := sub.Next(stream.Context())

		switch {
		case errors.Is(err, events.ErrLagged):
			return s.toStatus("Events", err)
		case err != nil:
			return nil // the caller went away
		}

		if req.GetWithActorId() != "" && ev.ActorID != req.GetWithActorId() {
			continue
		}

		msg, err := encodeEvent(ev)
		if err != nil {
			return s.toStatus("Events", err)
		}

		if err := stream.Send(msg); err != nil {
			return err
		}
	}
}

// firstSince returns the Seq of the oldest held event not before cutoff, or next.
func firstSince(bus *events.Bus, cutoff time.Time, next uint64) uint64 {
	for _, ev := range bus.Tail(-1) {
		if !ev.Time.Before(cutoff) {
			return ev.Seq
		}
	}

	return next
}

func encodeEvent(ev events.Event) (*machine.Event, error) {
	value, err := proto.Marshal(ev.Payload)
	if err != nil {
		return nil, err
	}

	return &machine.Event{
		Id:      strconv.FormatUint(ev.Seq, 10),
		ActorId: ev.ActorID,
		Data: &anypb.Any{
			TypeUrl: eventTypePrefix + string(ev.Payload.ProtoReflect().Descriptor().FullName()),
			Value:   value,
		},
	}, nil
}
