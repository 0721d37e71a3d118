// Package connlimit bounds the connections of a TCP listener, so that no
// client, and no single source of clients, can hold a server's connections
// and keep others out.
//
// A Limiter wraps a net.Listener. A connection over its source's cap is
// closed at once, and when every slot is taken the newest connection takes
// the slot of the oldest connection without a call from the source holding
// the most, if there is one. Otherwise it waits for a slot, up to
// Config.SlotWait and behind at most Config.MaxWaiting others (oldest
// first), holding only its socket, and is closed when none frees in time;
// without SlotWait it is closed at once.
// A connection that has started no call within Config.FirstCall is closed,
// whether its TLS handshake finished or not. The Limiter learns of calls
// through its gRPC stats handler (StatsHandler).
//
// What belongs to gRPC stays there: the deadline of the TLS handshake and
// HTTP/2 preface (grpc.ConnectionTimeout) and the graceful close of a
// connection idle after its calls (keepalive MaxConnectionIdle).
package connlimit
