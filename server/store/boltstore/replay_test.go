package boltstore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/agentplane/agentplane/server/store/schema"
)

// sealed is a log record (header and checksum) around payload, as the store writes one.
func sealed(payload []byte) []byte {
	var b walBatch
	b.reset()
	b.buf = append(b.buf, payload...)
	return b.record()
}

// mutation is one mutation of a record's payload, encoded as walBatch encodes it, or
// cut short after cut bytes (cut > 0).
func mutation(op byte, bucket, key, value []byte, cut int) []byte {
	p := appendBytes(appendBytes([]byte{op}, bucket), key)
	if op == walPut {
		p = appendBytes(p, value)
	}
	if cut > 0 {
		p = p[:cut]
	}
	return p
}

// replayRefusals are payloads a crash cannot produce (each is in a record whose
// checksum holds) and that replay must refuse, with the error the refusal carries.
var replayRefusals = []struct {
	name    string
	payload []byte
	want    error  // in the chain, if not nil
	text    string // in the message
}{
	{"a put with an empty key", mutation(walPut, schema.Tasks, nil, []byte("v"), 0), berrors.ErrKeyRequired, "key required"},
	{"a put with a key over bbolt's limit", mutation(walPut, schema.Tasks, bytes.Repeat([]byte("k"), bolt.MaxKeySize+1), []byte("v"), 0),
		berrors.ErrKeyTooLarge, "key too large"},
	{"a put refused after one applied", append(mutation(walPut, schema.Tasks, []byte("k"), []byte("v"), 0),
		mutation(walPut, schema.Tasks, nil, nil, 0)...), berrors.ErrKeyRequired, "key required"},
	{"a put into a bucket the schema lacks", mutation(walPut, []byte("nope"), []byte("k"), []byte("v"), 0), nil, `no bucket "nope"`},
	{"a delete in a bucket the schema lacks", mutation(walDelete, []byte("nope"), []byte("k"), nil, 0), nil, `no bucket "nope"`},
	{"an unknown operation", mutation(7, schema.Tasks, []byte("k"), nil, 0), nil, "unknown operation 7"},
	{"a bucket cut short", mutation(walPut, schema.Tasks, []byte("k"), []byte("v"), 3), nil, "truncated field"},
	{"a key cut short", mutation(walDelete, schema.Tasks, []byte("key"), nil, 1+1+len(schema.Tasks)+2), nil, "truncated field"},
	{"a value cut short", mutation(walPut, schema.Tasks, []byte("k"), []byte("value"), 1+1+len(schema.Tasks)+2+2), nil, "truncated field"},
	{"a length past the payload", append([]byte{walPut}, 0xff, 0xff, 0xff, 0xff, 0x0f), nil, "truncated field"},
	{"a length that overflows", append([]byte{walPut}, bytes.Repeat([]byte{0xff}, 11)...), nil, "truncated field"},
	{"an op with nothing after it", []byte{walDelete}, nil, "truncated field"},
}

// A record that is whole (its checksum holds) but that bbolt refuses, or that does not
// decode, makes Open refuse the store as corrupt, naming the segment and the cause;
// replaying past it would drop an acknowledged write. Refusing leaves the log as it
// was: the next Open refuses the same way.
func TestWALReplayRefusesARecordItCannotApply(t *testing.T) {
	for _, tc := range replayRefusals {
		t.Run(tc.name, func(t *testing.T) {
			s := openTempWith(t, Options{WAL: true})
			path := s.path
			workload(t, s, 0, 3)
			seg, end := lastSegment(t, s), s.wal.log.off
			crashClose(t, s)
			f, err := os.OpenFile(seg, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			// The last record of the log, followed by the zeros written ahead.
			if _, err := f.WriteAt(sealed(tc.payload), end); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				for _, opts := range []Options{{WAL: true}, {}} {
					_, err := Open(path, opts)
					if !errors.Is(err, errCorruptWAL) || !strings.Contains(err.Error(), seg) || !strings.Contains(err.Error(), tc.text) ||
						(tc.want != nil && !errors.Is(err, tc.want)) {
						t.Fatalf("Open (WAL %v) = %v, want a corrupt-log error naming %s with %q (%v)", opts.WAL, err, seg, tc.text, tc.want)
					}
				}
			}
		})
	}
}

// What bbolt refuses in a replay is refused whatever the reason, for deletes as for
// puts: a key that names a nested bucket (the schema has none, a damaged store might),
// a transaction that cannot write.
func TestWALApplyRecordReturnsBboltsRefusals(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "replay.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	nested := []byte("nested")
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(schema.Tasks)
		if err == nil {
			_, err = b.CreateBucket(nested)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	put := mutation(walPut, schema.Tasks, []byte("k"), []byte("v"), 0)
	del := mutation(walDelete, schema.Tasks, []byte("k"), nil, 0)
	for _, tc := range []struct {
		name     string
		writable bool
		payload  []byte
		want     error // nil: applied
	}{
		{"a put", true, put, nil},
		{"a delete", true, del, nil},
		{"a delete of a missing key", true, mutation(walDelete, schema.Tasks, []byte("missing"), nil, 0), nil},
		{"a put over a nested bucket", true, mutation(walPut, schema.Tasks, nested, []byte("v"), 0), berrors.ErrIncompatibleValue},
		{"a delete of a nested bucket", true, mutation(walDelete, schema.Tasks, nested, nil, 0), berrors.ErrIncompatibleValue},
		{"a put in a read-only transaction", false, put, berrors.ErrTxNotWritable},
		{"a delete in a read-only transaction", false, del, berrors.ErrTxNotWritable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tx, err := db.Begin(tc.writable)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if err := applyRecord(tx, tc.payload); !errors.Is(err, tc.want) {
				t.Fatalf("applyRecord = %v, want %v", err, tc.want)
			}
		})
	}
	for _, tc := range replayRefusals {
		t.Run(tc.name, func(t *testing.T) {
			tx, err := db.Begin(true)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			err = applyRecord(tx, tc.payload)
			if err == nil || !strings.Contains(err.Error(), tc.text) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("applyRecord = %v, want an error with %q (%v)", err, tc.text, tc.want)
			}
		})
	}
}

// The log's directory is replay's too: a segment that cannot be read, or a file that
// is not a segment, refuses the open rather than replaying around it.
func TestWALReplayRefusesALogItCannotRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		add  func(dir string) error
		want string
	}{
		{"a segment that is a directory", func(dir string) error {
			return os.Mkdir(filepath.Join(dir, segmentName(999)), 0o700)
		}, "is a directory"},
		{"a file that is not a segment", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "x"+walSuffix), nil, 0o600)
		}, "unexpected file x" + walSuffix},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTempWith(t, Options{WAL: true})
			path := s.path
			workload(t, s, 0, 3)
			crashClose(t, s)
			if err := tc.add(filepath.Join(filepath.Dir(path), walDirName)); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if _, err := Open(path, Options{WAL: true}); err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Open = %v, want an error with %q", err, tc.want)
				}
			}
		})
	}
}
