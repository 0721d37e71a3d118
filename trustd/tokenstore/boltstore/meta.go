package boltstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// The on-disk layout of a bbolt file's first pages, as bbolt (v1.x) writes
// them: a 16-byte page header (id, flags, count, overflow), and on the two
// meta pages the meta (magic, version, page size, flags, root bucket page
// and sequence, freelist page, high-water page, transaction id, and an
// FNV-64a checksum of the fields before it), in the machine's byte order.
const (
	pageHeaderSize   = 16
	metaSize         = 64
	metaChecksumAt   = 56
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	flagBranch       = 0x01
	flagLeaf         = 0x02
	flagFreelist     = 0x10
	minPageSize      = 1 << 10
	maxPageSize      = 1 << 16
	noFreelist       = ^uint64(0)
	firstDataPage    = 2
	minHighWaterMark = 4 // two meta pages, a freelist and a root
)

// meta is the part of a meta page the pre-flight check reads.
type meta struct {
	pageSize       uint32
	root, freelist uint64
	highWater      uint64
	txid           uint64
}

// errMeta marks a meta page that is not a valid bbolt meta page.
var errMeta = errors.New("not a valid meta page")

// readMeta decodes the meta of the page at buf.
func readMeta(buf []byte) (meta, error) {
	if len(buf) < pageHeaderSize+metaSize {
		return meta{}, errMeta
	}

	m := buf[pageHeaderSize : pageHeaderSize+metaSize]
	order := binary.NativeEndian

	h := fnv.New64a()
	h.Write(m[:metaChecksumAt]) //nolint:errcheck // hashing never fails

	if order.Uint32(m[0:]) != boltMagic || order.Uint32(m[4:]) != boltVersion || order.Uint64(m[metaChecksumAt:]) != h.Sum64() {
		return meta{}, errMeta
	}

	return meta{
		pageSize: order.Uint32(m[8:]), root: order.Uint64(m[16:]), freelist: order.Uint64(m[32:]),
		highWater: order.Uint64(m[40:]), txid: order.Uint64(m[48:]),
	}, nil
}

// preflight checks, before bbolt maps the file, what bbolt trusts when it
// opens one: a valid meta page, and that the pages it names (the freelist
// it loads at once, the root bucket) lie within the file and are of their
// kind. bbolt panics on a file that breaks these, after mapping it; the
// mapping then holds the file, and its lock, until the process ends.
func preflight(path string) error {
	f, err := os.Open(path) //nolint:gosec // the store's own path
	if err != nil {
		return fmt.Errorf("boltstore: %w", err)
	}
	defer f.Close() //nolint:errcheck // read-only

	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("boltstore: %w", err)
	}

	m, err := chooseMeta(f)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
	}

	if err = checkLayout(f, m, st.Size()); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
	}

	return nil
}

// chooseMeta picks the meta bbolt would: the valid one of the two with the
// higher transaction id.
func chooseMeta(f *os.File) (meta, error) {
	first := make([]byte, pageHeaderSize+metaSize)
	if _, err := f.ReadAt(first, 0); err != nil {
		return meta{}, fmt.Errorf("reading the first meta page: %w", err)
	}

	pageSize := uint32(os.Getpagesize()) //nolint:gosec // a page size
	m0, err0 := readMeta(first)

	if err0 == nil {
		pageSize = m0.pageSize
	}

	second := make([]byte, pageHeaderSize+metaSize)
	if _, err := f.ReadAt(second, int64(pageSize)); err != nil && !errors.Is(err, io.EOF) {
		return meta{}, fmt.Errorf("reading the second meta page: %w", err)
	}

	m1, err1 := readMeta(second)

	switch {
	case err0 != nil && err1 != nil:
		return meta{}, errMeta
	case err0 != nil || (err1 == nil && m1.txid > m0.txid):
		return m1, nil
	default:
		return m0, nil
	}
}

// checkLayout checks the chosen meta against the file: a sane page size,
// every page it names within the high-water mark, the high-water mark
// within the file, and the freelist and root pages of their kind.
func checkLayout(f *os.File, m meta, size int64) error {
	switch {
	case m.pageSize < minPageSize || m.pageSize > maxPageSize || m.pageSize&(m.pageSize-1) != 0:
		return fmt.Errorf("page size %d", m.pageSize)
	case m.highWater < minHighWaterMark || m.highWater > uint64(size)/uint64(m.pageSize): //nolint:gosec // a file size
		return fmt.Errorf("%d bytes hold %d pages of %d, the meta names %d (truncated)", size, size/int64(m.pageSize), m.pageSize, m.highWater)
	case m.freelist == noFreelist:
		// bbolt would rebuild the freelist and write it while opening.
		return errors.New("no freelist recorded")
	case m.freelist < firstDataPage || m.freelist >= m.highWater || m.root < firstDataPage || m.root >= m.highWater:
		return fmt.Errorf("freelist page %d or root page %d outside [%d, %d)", m.freelist, m.root, firstDataPage, m.highWater)
	}

	if err := checkPage(f, m, m.freelist, flagFreelist); err != nil {
		return fmt.Errorf("freelist: %w", err)
	}

	if err := checkPage(f, m, m.root, flagBranch|flagLeaf); err != nil {
		return fmt.Errorf("root bucket: %w", err)
	}

	return nil
}

// checkPage checks that page id says it is page id, has one of the flags
// kinds, and with its overflow pages ends below the high-water mark.
func checkPage(f *os.File, m meta, id uint64, kinds uint16) error {
	hdr := make([]byte, pageHeaderSize)
	if _, err := f.ReadAt(hdr, int64(id*uint64(m.pageSize))); err != nil { //nolint:gosec // below the file size
		return fmt.Errorf("page %d: %w", id, err)
	}

	order := binary.NativeEndian
	gotID, flags, overflow := order.Uint64(hdr[0:]), order.Uint16(hdr[8:]), uint64(order.Uint32(hdr[12:]))

	switch {
	case gotID != id:
		return fmt.Errorf("page %d says it is page %d", id, gotID)
	case flags&kinds == 0:
		return fmt.Errorf("page %d has flags %#x", id, flags)
	case id+overflow >= m.highWater:
		return fmt.Errorf("page %d runs %d pages past the high-water mark %d", id, overflow, m.highWater)
	}

	return nil
}
