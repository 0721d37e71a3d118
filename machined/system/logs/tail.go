package logs

import "bytes"

// segment is one file of the log up to a size: the current file, or the
// older one (path.1) of the generation before.
type segment struct {
	path string
	gen  uint64
	size int64
}

func (s segment) start() Position { return Position{gen: s.gen} }

// lineStart finds where the last n (> 0) lines of segs (newest first)
// start, reading backwards one chunk at a time. A newline that ends the
// log ends its last line and starts none; with fewer than n lines, the
// whole log is the tail.
func lineStart(segs []segment, n int) (start, end Position, err error) {
	end = Position{gen: segs[0].gen, offset: segs[0].size}
	last := true

	for _, s := range segs {
		for hi := s.size; hi > 0; {
			lo := max(hi-ReadChunk, 0)

			chunk, err := readRange(s.path, lo, hi-lo)
			if err != nil {
				return end, end, err
			}

			if last && len(chunk) > 0 {
				chunk = bytes.TrimSuffix(chunk, []byte{'\n'})
				last = false
			}

			for i := len(chunk); ; {
				i = bytes.LastIndexByte(chunk[:i], '\n')
				if i < 0 {
					break
				}

				if n--; n == 0 {
					return Position{gen: s.gen, offset: lo + int64(i) + 1}, end, nil
				}
			}

			hi = lo
		}
	}

	return segs[len(segs)-1].start(), end, nil
}
