package boltstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// The write-ahead log is a directory of numbered segment files. Each record is one
// committed batch: a header of payload length (uint32, little endian) and the CRC32C
// of the payload, then the payload, a list of mutations:
//
//	op (1 byte: walPut or walDelete), uvarint len + bucket, uvarint len + key,
//	and for walPut uvarint len + value.
//
// Buckets are top-level bbolt buckets (the schema has no nested ones).

const (
	walPut    byte = 1
	walDelete byte = 2

	walHeader    = 8
	walMaxRecord = 1 << 30 // a sanity bound on a record's length field
	walSuffix    = ".log"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// walBatch accumulates the mutations of one transaction attempt, in the order bbolt
// saw them. The bytes are copied: bbolt's keys and values may point into the mmap.
type walBatch struct {
	buf []byte
}

func (b *walBatch) reset() {
	b.buf = b.buf[:0]
	b.buf = append(b.buf, make([]byte, walHeader)...)
}

func (b *walBatch) put(bucket, key, value []byte) {
	b.buf = append(b.buf, walPut)
	b.buf = appendBytes(appendBytes(appendBytes(b.buf, bucket), key), value)
}

func (b *walBatch) del(bucket, key []byte) {
	b.buf = append(b.buf, walDelete)
	b.buf = appendBytes(appendBytes(b.buf, bucket), key)
}

func appendBytes(dst, p []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(p))), p...)
}

// record seals the batch: fills in the header and returns the bytes to append.
func (b *walBatch) record() []byte {
	payload := b.buf[walHeader:]
	binary.LittleEndian.PutUint32(b.buf[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b.buf[4:8], crc32.Checksum(payload, castagnoli))
	return b.buf
}

// applyRecord replays one record's mutations in tx.
func applyRecord(tx *bolt.Tx, payload []byte) error {
	next := func() ([]byte, error) {
		n, k := binary.Uvarint(payload)
		if k <= 0 || uint64(len(payload)-k) < n {
			return nil, errors.New("truncated field")
		}
		p := payload[k : k+int(n)]
		payload = payload[k+int(n):]
		return p, nil
	}
	for len(payload) > 0 {
		op := payload[0]
		payload = payload[1:]
		bucket, err := next()
		if err != nil {
			return err
		}
		key, err := next()
		if err != nil {
			return err
		}
		b := tx.Bucket(bucket)
		if b == nil {
			return fmt.Errorf("no bucket %q", bucket)
		}
		switch op {
		case walPut:
			var value []byte
			if value, err = next(); err == nil {
				err = b.Put(key, value)
			}
		case walDelete:
			err = b.Delete(key)
		default:
			return fmt.Errorf("unknown operation %d", op)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// wal is the open segment being appended to.
type wal struct {
	dir   string
	seq   uint64 // number of the open segment
	f     *os.File
	off   int64 // where the next record of the open segment goes
	alloc int64 // bytes of the open segment already written (records, then zeros)
	size  int64 // bytes appended since the last checkpoint (all segments)
	// wrote, set by tests only, sees every write to the open segment once it is made.
	wrote func(off int64, p []byte)
}

// walChunk is how far ahead of its records a segment is filled with zeros. Appending
// changes the file's size, which fdatasync must then journal on every commit;
// overwriting blocks the file already has does not, which makes the one fsync of a
// commit cheaper. Zeros past the last record read as the end of the segment.
const walChunk = 4 << 20

var zeros = make([]byte, 64<<10)

func segmentName(seq uint64) string { return fmt.Sprintf("%06d%s", seq, walSuffix) }

// listSegments returns the segment numbers in dir, ascending.
func listSegments(dir string) ([]uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var seqs []uint64
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), walSuffix)
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(name, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("unexpected file %s in %s", e.Name(), dir)
		}
		seqs = append(seqs, n)
	}
	slices.Sort(seqs)
	return seqs, nil
}

// openSegment creates segment seq (empty) and makes its directory entry durable.
func (w *wal) openSegment(seq uint64) error {
	f, err := os.OpenFile(filepath.Join(w.dir, segmentName(seq)), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if err := syncDir(w.dir); err != nil {
		_ = f.Close()
		return err
	}
	if w.f != nil {
		_ = w.f.Close()
	}
	w.f, w.seq, w.off, w.alloc = f, seq, 0, 0
	return nil
}

// append writes one record; sync makes it durable. When the record would reach past
// the zeros written ahead, another walChunk of zeros is written first (made durable
// by the same fdatasync as the record).
func (w *wal) append(rec []byte) error {
	end := w.off + int64(len(rec))
	if end > w.alloc {
		for w.alloc < end+walChunk {
			if err := w.writeAt(zeros, w.alloc); err != nil {
				return err
			}
			w.alloc += int64(len(zeros))
		}
	}
	if err := w.writeAt(rec, w.off); err != nil {
		return err
	}
	w.off = end
	w.size += int64(len(rec))
	return nil
}

func (w *wal) writeAt(p []byte, off int64) error {
	if _, err := w.f.WriteAt(p, off); err != nil {
		return err
	}
	if w.wrote != nil {
		w.wrote(off, p)
	}
	return nil
}

// removeBefore deletes the segments numbered below seq.
func (w *wal) removeBefore(seq uint64) error {
	seqs, err := listSegments(w.dir)
	if err != nil {
		return err
	}
	for _, n := range seqs {
		if n < seq {
			if err := fsRemove(filepath.Join(w.dir, segmentName(n))); err != nil {
				return err
			}
		}
	}
	return syncDir(w.dir)
}

func (w *wal) close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// errCorruptWAL is wrapped by Open's error when the log is damaged in a way a crash
// cannot explain: replaying past the damage would silently drop acknowledged writes.
var errCorruptWAL = errors.New("write-ahead log is corrupt")

// sectorSize is the unit a disk writes atomically. A crash during writeback leaves
// each sector of a segment either as written or as it was before, and before it held a
// record every byte of a segment was zero (written ahead, see walChunk, or a hole).
const sectorSize = 512

// logEnd is where the records of a log end: in segment seq (at path) at offset off,
// followed by size-off bytes of zeros or of a torn tail (torn).
type logEnd struct {
	seq       uint64
	path      string
	off, size int64
	torn      bool
}

// replayLog applies the segments seqs of dir to db, in order, and returns the bytes of
// records applied and where they end (nil if no segment holds anything).
//
// A segment ends at its last record: what follows is zeros or nothing. Damage is a
// torn tail, where the log ends, if it is in the last segment that holds anything and
// a crash can have caused it: the file ends inside the record, its length is zero, or
// a sector it covers is zero from the record's bytes to the sector's end (the sector
// never reached the disk), or nothing but zeros follows it. Such a record was never
// acknowledged, and neither was anything after it in the segment, even a valid
// record: the store acknowledges a record once an fdatasync that started after it was
// written returns, and that fdatasync would have written the damaged record's sectors
// too (kernels and disks write pages back in any order, so later pages can reach the
// disk first). Any other damage, and any damage in an earlier segment (a segment is
// fdatasynced in full before the next one is started), is corruption.
func replayLog(db *bolt.DB, dir string, seqs []uint64) (replayed int64, last *logEnd, err error) {
	data := make([][]byte, len(seqs))
	lastIdx := -1
	for i, seq := range seqs {
		if data[i], err = os.ReadFile(filepath.Join(dir, segmentName(seq))); err != nil {
			return 0, nil, err
		}
		if !allZero(data[i]) {
			lastIdx = i
		}
	}
	for i, seq := range seqs[:lastIdx+1] {
		path := filepath.Join(dir, segmentName(seq))
		end, torn, err := replaySegment(db, path, data[i], i == lastIdx)
		if err != nil {
			return 0, nil, err
		}
		replayed += int64(end)
		if i == lastIdx {
			last = &logEnd{seq: seq, path: path, off: int64(end), size: int64(len(data[i])), torn: torn}
		}
		data[i] = nil
	}
	return replayed, last, nil
}

func allZero(p []byte) bool { return contentEnd(p) == 0 }

// contentEnd returns the length of p without its trailing zeros, comparing whole blocks
// first: a segment's tail is megabytes of zeros.
func contentEnd(p []byte) int {
	end := len(p)
	for end > 0 {
		n := min(end, len(zeros))
		if !bytes.Equal(p[end-n:end], zeros[:n]) {
			return len(bytes.TrimRight(p[:end], "\x00"))
		}
		end -= n
	}
	return 0
}

// replaySegment applies the records of one segment (data, read from path) to db, a
// transaction per chunk of records, and returns where its records end and whether a
// damaged record follows them (a torn tail; tolerated only if last, see replayLog).
func replaySegment(db *bolt.DB, path string, data []byte, last bool) (end int, torn bool, err error) {
	var payloads [][]byte
	// Past content, only the zeros written ahead of the records (found once: a check
	// per record would scan those zeros, megabytes, for every record).
	content := contentEnd(data)
	off := 0
	for off < content {
		rest := data[off:]
		bad := ""
		var n int
		switch {
		case len(rest) < walHeader:
			bad = "short header"
		default:
			n = int(binary.LittleEndian.Uint32(rest[0:4]))
			switch {
			case n == 0 || n > walMaxRecord:
				bad = fmt.Sprintf("bad length %d", n)
			case len(rest) < walHeader+n:
				bad = "short record"
			case crc32.Checksum(rest[walHeader:walHeader+n], castagnoli) != binary.LittleEndian.Uint32(rest[4:8]):
				bad = "checksum mismatch"
			}
		}
		if bad == "" {
			payloads = append(payloads, rest[walHeader:walHeader+n])
			off += walHeader + n
			continue
		}
		if last && tornRecord(data, content, off, n) {
			torn = true
			break
		}
		return 0, false, fmt.Errorf("%w: %s: record at offset %d: %s, with %d bytes after it",
			errCorruptWAL, path, off, bad, len(rest))
	}
	for first := 0; first < len(payloads); first += 1024 {
		chunk := payloads[first:min(len(payloads), first+1024)]
		if err := db.Update(func(tx *bolt.Tx) error {
			for i, p := range chunk {
				if err := applyRecord(tx, p); err != nil {
					return fmt.Errorf("%w: %s: record %d: %w", errCorruptWAL, path, first+i, err)
				}
			}
			return nil
		}); err != nil {
			return 0, false, err
		}
	}
	return off, torn, nil
}

// tornRecord says whether the damaged record at off of a segment's data (of length n,
// as its header says; the data is zeros from content on) can be an append a crash cut short: see
// replayLog.
func tornRecord(data []byte, content, off, n int) bool {
	rest := data[off:]
	switch {
	case len(rest) < walHeader || len(rest) < walHeader+n && n <= walMaxRecord:
		return true // the file ends inside the record
	case n == 0:
		return true // the header never reached the disk
	case n > walMaxRecord:
		return off+walHeader >= content
	}
	end := off + walHeader + n
	for s := off; s < end; s = (s/sectorSize + 1) * sectorSize {
		if allZero(data[s:min(len(data), (s/sectorSize+1)*sectorSize)]) {
			return true
		}
	}
	return end >= content
}

// truncate cuts the segment after its last record, durably, so that a torn tail is
// never read again (the log goes on in a new segment after it) and a segment kept
// after a recovery holds its records only.
func (e *logEnd) truncate() error {
	f, err := os.OpenFile(e.path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(e.off)
	if err == nil {
		err = fdatasync(f)
	}
	return errors.Join(err, f.Close())
}

// copyFile writes src to dst through a temporary file, fsynced and renamed, so dst
// is either the old file or a complete copy.
func copyFile(dst string, src io.Reader) error {
	tmp := dst + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, src)
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := fsRename(tmp, dst); err != nil {
		return err
	}
	return syncDir(filepath.Dir(dst))
}
