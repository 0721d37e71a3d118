package apid

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// fields splits an encoded message into its field-1 entries and the bytes
// of every other field, in order; ok is false if it does not parse.
func fields(b []byte) (entries [][]byte, others []byte, ok bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, nil, false
		}

		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil, nil, false
		}

		if num == metadataField && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b[n:])
			entries = append(entries, v)
		} else {
			others = append(others, b[:n+m]...)
		}

		b = b[n+m:]
	}

	return entries, others, true
}

// FuzzTagResponse covers the replies other nodes send to a fan-out, which
// apid merges without decoding: whatever a node sends, tagging refuses it
// or keeps every other field as it was and ends every entry with the
// node's metadata.
func FuzzTagResponse(f *testing.F) {
	meta := newTag("node-1").meta

	f.Add([]byte{})
	f.Add(appendEntry(nil, []byte{0x12, 0x01, 'x'}))
	f.Add(append(appendEntry(appendEntry(nil, nil), []byte{0x08, 0x01}), 0x10, 0x05))
	f.Add([]byte{0x08, 0x96, 0x01})
	f.Add([]byte{0x0d, 1, 2, 3, 4})
	f.Add([]byte{0x0a, 0xff})

	f.Fuzz(func(t *testing.T, resp []byte) {
		out, err := tagResponse(resp, meta)
		if err != nil {
			if !errors.Is(err, errNotTalosReply) {
				t.Fatalf("refusal %v is not errNotTalosReply", err)
			}

			return
		}

		inEntries, inOthers, ok := fields(resp)
		if !ok {
			t.Fatal("a reply that does not parse was tagged")
		}

		outEntries, outOthers, ok := fields(out)
		if !ok {
			t.Fatal("the tagged reply does not parse")
		}

		if !bytes.Equal(inOthers, outOthers) {
			t.Fatal("tagging changed fields other than the entries")
		}

		if len(outEntries) != max(len(inEntries), 1) {
			t.Fatalf("%d entries out of %d", len(outEntries), len(inEntries))
		}

		for i, e := range outEntries {
			if !bytes.HasSuffix(e, meta) || (i < len(inEntries) && !bytes.Equal(e[:len(e)-len(meta)], inEntries[i])) {
				t.Fatalf("entry %d is not the node's entry followed by its metadata", i)
			}
		}
	})
}
