package connlimit

import "container/list"

// handshakeRoom is the connections doing their handshake beyond Total
// (proven.go), oldest first, with their count by source kept as they come
// and go. Every newcomer asks it how many handshakes its source has there
// and how many strangers are in it, and the room is large exactly when
// newcomers are many: after a control plane restarts, every node it
// served reconnects through it. Counting by a walk of the room cost each
// newcomer a string comparison per handshake in it, under the Limiter's
// lock (a tenth of trustd's CPU, with 5,000 nodes reconnecting).
//
// A connection's known flag must not change while it is in the room: it
// says in which list it is.
type handshakeRoom struct {
	known, strangers list.List // *conn, oldest first
	bySource         map[string]int
}

// len is how many handshakes are in the room.
func (r *handshakeRoom) len() int { return r.known.Len() + r.strangers.Len() }

// of is how many handshakes of src are in the room.
func (r *handshakeRoom) of(src string) int { return r.bySource[src] }

// add puts c at the end of the room.
func (r *handshakeRoom) add(c *conn) {
	if r.bySource == nil {
		r.bySource = map[string]int{}
	}

	if c.known {
		c.inRoom = r.known.PushBack(c)
	} else {
		c.inRoom = r.strangers.PushBack(c)
	}

	r.bySource[c.source]++
}

// drop takes c out of the room, if it is there.
func (r *handshakeRoom) drop(c *conn) {
	if c.inRoom == nil {
		return
	}

	if c.known {
		r.known.Remove(c.inRoom)
	} else {
		r.strangers.Remove(c.inRoom)
	}

	c.inRoom = nil

	if r.bySource[c.source]--; r.bySource[c.source] <= 0 {
		delete(r.bySource, c.source)
	}
}
