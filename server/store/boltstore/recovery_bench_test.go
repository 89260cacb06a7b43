package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/agentplane/agentplane/server/store"
)

// BenchmarkRecovery times the start after an unclean stop in the write-ahead log mode,
// for stores of the sizes (MiB) in AGENTPLANE_BENCH_RECOVERY_MB (default "100"), each
// with a log as large as it gets before a checkpoint starts (64 MiB, or an eighth of
// the store if that is more): the worst case. The store is built first (not timed);
// it needs about three times its size on disk. fastest-s is the fastest start, the
// figure least disturbed by whatever else the machine does.
//
//	AGENTPLANE_BENCH_RECOVERY_MB=100,1024 go test -run '^$' -bench Recovery -benchtime 3x ./server/store/boltstore/
func BenchmarkRecovery(b *testing.B) {
	sizes := os.Getenv("AGENTPLANE_BENCH_RECOVERY_MB")
	if sizes == "" {
		sizes = "100"
	}
	for f := range strings.SplitSeq(sizes, ",") {
		mb, err := strconv.Atoi(f)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("store=%dMiB", mb), func(b *testing.B) { benchRecovery(b, int64(mb)<<20) })
	}
}

func benchRecovery(b *testing.B, size int64) {
	opts := Options{WAL: true, CheckpointBytes: 1 << 40, CheckpointInterval: time.Hour}
	path := filepath.Join(b.TempDir(), "agentplane.db")
	bucket := []byte("bench")
	value := make([]byte, 64<<10)
	// put writes n bytes of values in Updates of 4 MiB.
	put := func(s *Store, prefix string, n int64) {
		for i := int64(0); i*int64(len(value)) < n; {
			if err := s.Update(context.Background(), func(w store.Writer) error {
				for range 64 {
					if err := w.(*writer).putRaw(bucket, fmt.Appendf(nil, "%s-%08d", prefix, i), value); err != nil {
						return err
					}
					i++
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		}
	}
	s, err := Open(path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket(bucket); return err }); err != nil {
		b.Fatal(err)
	}
	put(s, "store", size)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if s, err = Open(path, opts); err != nil { // the first checkpoint
		b.Fatal(err)
	}
	logged := max(64<<20, size/checkpointShare)
	put(s, "log", logged)
	if err := abandon(s); err != nil {
		b.Fatal(err)
	}
	ckpt, err := os.Stat(filepath.Join(filepath.Dir(path), checkpointName))
	if err != nil {
		b.Fatal(err)
	}
	fastest := time.Duration(1<<63 - 1)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		s, err := Open(path, opts)
		if err != nil {
			b.Fatal(err)
		}
		fastest = min(fastest, time.Since(start))
		b.StopTimer()
		if err := abandon(s); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(fastest.Seconds(), "fastest-s")
	b.ReportMetric(float64(ckpt.Size())/(1<<20), "checkpoint-MiB")
	b.ReportMetric(float64(logged)/(1<<20), "log-MiB")
}

// abandon closes s as a SIGKILL leaves it: no final checkpoint, no clean marker.
func abandon(s *Store) error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	s.closed = true
	close(s.wal.stop)
	<-s.wal.done
	return errors.Join(s.wal.log.close(), s.db.Close(), s.wal.lock.Close())
}
