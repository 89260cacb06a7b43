package boltstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/storetest"
)

// bbolt remaps a growing file only when no read transaction is open, so a reader
// must not wait for a batch's durability while it holds its transaction: that batch
// may be the one waiting to remap. A tiny initial map makes remaps frequent while
// readers and writers run side by side; a deadlock panics the test after 10 s. Backups
// (Snapshot) run alongside too.
func TestWALReadersDoNotBlockARemap(t *testing.T) {
	// Closed at the end, not deferred: after a deadlock Close would wait forever.
	s := openTempWith(t, Options{WAL: true, InitialMmapSize: 1 << 16})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				err := s.Update(ctx, func(wr store.Writer) error {
					rec := storetest.Task("acme", fmt.Sprintf("w%d-%06d", w, i), time.Now())
					rec.Labels = map[string]string{"pad": strings.Repeat("x", 2000)}
					return wr.PutTask(rec)
				})
				if err != nil && ctx.Err() == nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				if err := s.View(ctx, func(r store.Reader) error {
					_, err := r.GetTask("acme", "w0-000000")
					if store.IsNotFound(err) {
						return nil
					}
					return err
				}); err != nil && ctx.Err() == nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for ctx.Err() == nil {
			sn, err := s.Snapshot(ctx)
			if err != nil {
				if ctx.Err() == nil {
					t.Error(err)
				}
				return
			}
			_, err = sn.WriteTo(io.Discard)
			if err := errors.Join(err, sn.Close()); err != nil {
				t.Error(err)
				return
			}
		}
	})
	go func() { wg.Wait(); close(done) }()
	// Run until the file has grown to 32 times the initial map (several remaps, as the
	// map doubles), or give up after 30 s; a deadlock stops the growth.
	size := func() int64 { // the file's size: a read transaction would queue behind a stuck remap
		fi, err := os.Stat(s.path)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	for deadline := time.Now().Add(30 * time.Second); size() < 2<<20 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		panic("readers and writers deadlocked: a reader waited for durability while holding the map")
	}
	if n := size(); n < 2<<20 {
		t.Errorf("the store grew to %d bytes in 30 s: too little to have remapped often", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
