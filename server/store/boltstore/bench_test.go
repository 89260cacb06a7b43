package boltstore

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/agentplane/agentplane/server/store"
)

// The commit benchmarks write one 256-byte value under a fresh 8-byte key per
// operation (the shape of etcd's put benchmark), each durable before the call returns.
//
//	go test -run '^$' -bench Commit -benchtime 2000x ./server/store/boltstore/

var benchValue = make([]byte, 256)

// latencies records per-operation durations and reports ops/s, p50 and p99.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) time(f func()) {
	start := time.Now()
	f()
	d := time.Since(start)
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	if len(l.d) == 0 {
		return
	}
	sort.Slice(l.d, func(i, j int) bool { return l.d[i] < l.d[j] })
	b.ReportMetric(float64(l.d[len(l.d)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(l.d[len(l.d)*99/100].Microseconds())/1000, "p99-ms")
}

// parallel runs op from clients goroutines until b.N operations are done.
func parallel(b *testing.B, clients int, op func(i uint64)) {
	var next atomic.Uint64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range clients {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > uint64(b.N) {
					return
				}
				op(i)
			}
		})
	}
	wg.Wait()
}

func benchDB(b *testing.B, opts Options) *Store {
	s, err := Open(filepath.Join(b.TempDir(), "bench.db"), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	if err := s.db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists([]byte("bench")); return err }); err != nil {
		b.Fatal(err)
	}
	return s
}

func key(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }

func BenchmarkCommit(b *testing.B) {
	for _, clients := range []int{1, 64} {
		b.Run("plain-db.Update/clients="+strconv.Itoa(clients), func(b *testing.B) {
			s := benchDB(b, Options{})
			var lat latencies
			parallel(b, clients, func(i uint64) {
				lat.time(func() {
					if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("bench")).Put(key(i), benchValue) }); err != nil {
						b.Error(err)
					}
				})
			})
			lat.report(b)
		})
		b.Run("bbolt-Batch-defaults/clients="+strconv.Itoa(clients), func(b *testing.B) {
			s := benchDB(b, Options{})
			var lat latencies
			parallel(b, clients, func(i uint64) {
				lat.time(func() {
					if err := s.db.Batch(func(tx *bolt.Tx) error { return tx.Bucket([]byte("bench")).Put(key(i), benchValue) }); err != nil {
						b.Error(err)
					}
				})
			})
			lat.report(b)
		})
		for _, v := range []struct {
			name string
			opts Options
		}{{"group-commit", Options{}}, {"group-commit-no-linger", Options{MaxLinger: -1}}, {"group-commit-wal", Options{WAL: true}}} {
			b.Run(v.name+"/clients="+strconv.Itoa(clients), func(b *testing.B) {
				s := benchDB(b, v.opts)
				var lat latencies
				parallel(b, clients, func(i uint64) {
					lat.time(func() {
						if err := s.Update(context.Background(), func(w store.Writer) error {
							return w.(*writer).putRaw([]byte("bench"), key(i), benchValue)
						}); err != nil {
							b.Error(err)
						}
					})
				})
				lat.report(b)
				st, _ := s.Stats(context.Background())
				if st.Commits > 0 {
					b.ReportMetric(float64(st.Updates)/float64(st.Commits), "updates/commit")
				}
			})
		}
	}
}
