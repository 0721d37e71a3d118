package apid

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
)

// poolThreshold is above gRPC's size for plain, unpooled slices (1 KiB).
const poolThreshold = 4096

// countingPool hands out buffers and counts those given back.
type countingPool struct{ put int }

func (p *countingPool) Get(n int) *[]byte { b := make([]byte, n); return &b }
func (p *countingPool) Put(*[]byte)       { p.put++ }

// received is a message as gRPC hands it to a codec: in pooled buffers
// of its own, which it frees once Unmarshal returns.
func received(pool *countingPool, parts ...[]byte) mem.BufferSlice {
	var out mem.BufferSlice
	for _, p := range parts {
		out = append(out, mem.Copy(p, pool))
	}

	return out
}

// TestFramePassesBuffersWithoutCopy: a received frame holds gRPC's buffers
// rather than a copy, sends those same bytes, and gives them back to the
// pool only once gRPC's send and the frame are both done with them.
func TestFramePassesBuffersWithoutCopy(t *testing.T) {
	pool := &countingPool{}
	msg := bytes.Repeat([]byte("frame"), poolThreshold) // pooled, not a plain slice
	data := received(pool, msg)

	f := &frame{}
	if err := (rawCodec{}).Unmarshal(data, f); err != nil {
		t.Fatal(err)
	}

	data.Free() // gRPC's own reference, as recv drops it
	if pool.put != 0 {
		t.Fatal("the frame's buffer went back to the pool while the frame holds it")
	}

	if got := f.bytes(); &got[0] != &data[0].ReadOnlyData()[0] || !bytes.Equal(got, msg) {
		t.Fatal("the frame copied the received message")
	}

	for range 2 { // a frame may be sent more than once
		out, err := (rawCodec{}).Marshal(f)
		if err != nil {
			t.Fatal(err)
		}

		if !bytes.Equal(out.Materialize(), msg) || &out[0].ReadOnlyData()[0] != &data[0].ReadOnlyData()[0] {
			t.Fatal("the frame was not sent as received, from the same buffer")
		}

		out.Free() // as gRPC does once the message is written
	}

	if pool.put != 0 {
		t.Fatal("the buffer went back to the pool before the frame was freed")
	}

	f.free()

	if pool.put != 1 {
		t.Fatalf("%d buffers back in the pool after the frame was freed, want 1", pool.put)
	}
}

// TestFrameOwnCopies: a frame handed to several senders (a fan-out's
// request) becomes a copy of its own and gives gRPC's buffers back at
// once; a message received in several buffers reads as one.
func TestFrameOwnCopies(t *testing.T) {
	pool := &countingPool{}
	a, b := bytes.Repeat([]byte{1}, 2*poolThreshold), bytes.Repeat([]byte{2}, 2*poolThreshold)
	data := received(pool, a, b)

	f := &frame{}
	if err := (rawCodec{}).Unmarshal(data, f); err != nil {
		t.Fatal(err)
	}

	data.Free()

	if got := f.bytes(); !bytes.Equal(got, append(append([]byte{}, a...), b...)) {
		t.Fatal("a frame of two buffers does not read as the message")
	}

	f.own()

	if pool.put != 2 || !bytes.Equal(f.bytes(), append(append([]byte{}, a...), b...)) {
		t.Fatalf("after own: %d buffers back, want 2; or the copy differs", pool.put)
	}

	out, err := (rawCodec{}).Marshal(f)
	if err != nil || !bytes.Equal(out.Materialize(), f.bytes()) {
		t.Fatalf("an owned frame sends %v", err)
	}
}
