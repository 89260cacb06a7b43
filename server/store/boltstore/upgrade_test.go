package boltstore

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
	"github.com/agentplane/agentplane/server/store/storetest"
)

// TestUpgradeFromVersion1 opens a store in version 1's layout (one run queue per
// tenant, keyed by time) and finds its queued tasks in the default queue, counted,
// under version 2; in the write-ahead log mode the checkpoint is of the upgraded file.
func TestUpgradeFromVersion1(t *testing.T) {
	for _, wal := range []bool{false, true} {
		t.Run(fmt.Sprintf("wal=%v", wal), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "agentplane.db")
			s, err := Open(path, Options{WAL: wal})
			if err != nil {
				t.Fatal(err)
			}
			base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			var recs []*storagev1.TaskRecord
			for i, tenant := range []string{"acme", "acme", "beta"} {
				rec := storetest.Task(tenant, fmt.Sprintf("t%d", i), base)
				rec.QueueTime = timestamppb.New(base.Add(time.Duration(i) * time.Second))
				recs = append(recs, rec)
			}
			if err := s.Update(context.Background(), func(w store.Writer) error {
				for _, rec := range recs {
					if err := w.PutTask(rec); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			downgrade(t, path)
			if wal {
				downgrade(t, filepath.Join(dir, checkpointName))
			}

			s, err = Open(path, Options{WAL: wal})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			if err := s.View(context.Background(), func(r store.Reader) error {
				for _, tenant := range []string{"acme", "beta"} {
					if err := r.ScanQueue(tenant, store.DefaultQueue, store.IndexRange{}, func(e store.IndexEntry) (bool, error) {
						ids = append(ids, e.ID)
						return true, nil
					}); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(ids) != "[t0 t1 t2]" {
				t.Fatalf("queued after the upgrade: %v", ids)
			}
			st, err := s.Stats(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st.SchemaVersion != schema.Version || fmt.Sprint(st.QueueDepth) != "map[default:3]" {
				t.Fatalf("stats after the upgrade: version %d, queue depth %v", st.SchemaVersion, st.QueueDepth)
			}
			if err := s.Check(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			files := []string{path}
			if wal {
				files = append(files, filepath.Join(dir, checkpointName))
			}
			for _, f := range files {
				if v := version(t, f); v != schema.Version {
					t.Fatalf("%s has schema version %d after the upgrade", filepath.Base(f), v)
				}
			}
		})
	}
}

// downgrade rewrites a version 2 file into version 1's layout.
func downgrade(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		old, err := tx.CreateBucket(schema.QueueV1)
		if err != nil {
			return err
		}
		if err := tx.Bucket(schema.RunQueue).ForEach(func(k, _ []byte) error {
			tenant, _, at, id, ok := schema.DecodeQueueKey(k)
			if !ok {
				return fmt.Errorf("bad key %x", k)
			}
			return old.Put(schema.TimeKey(tenant, at, id), nil)
		}); err != nil {
			return err
		}
		if err := tx.DeleteBucket(schema.RunQueue); err != nil {
			return err
		}
		var depth [][]byte
		_ = tx.Bucket(schema.Counters).ForEach(func(k, _ []byte) error {
			if bytes.Contains(k, []byte(schema.CounterQueueDepth)) {
				depth = append(depth, bytes.Clone(k))
			}
			return nil
		})
		for _, k := range depth {
			if err := tx.Bucket(schema.Counters).Delete(k); err != nil {
				return err
			}
		}
		info := &storagev1.SchemaInfo{}
		if err := proto.Unmarshal(tx.Bucket(schema.Meta).Get(schema.MetaSchemaKey), info); err != nil {
			return err
		}
		info.Version = 1
		v, err := proto.Marshal(info)
		if err != nil {
			return err
		}
		return tx.Bucket(schema.Meta).Put(schema.MetaSchemaKey, v)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func version(t *testing.T, path string) int32 {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	info := &storagev1.SchemaInfo{}
	if err := db.View(func(tx *bolt.Tx) error {
		return proto.Unmarshal(tx.Bucket(schema.Meta).Get(schema.MetaSchemaKey), info)
	}); err != nil {
		t.Fatal(err)
	}
	return info.GetVersion()
}

// TestUpgradeFromVersion3 opens a store written before schedules (no schedule
// buckets, version 3): it is upgraded to the current version, keeps its tasks, and
// takes schedules.
func TestUpgradeFromVersion3(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentplane.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if err := s.Update(context.Background(), func(w store.Writer) error { return w.PutTask(storetest.Task("acme", "t0", base)) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, name := range schema.ScheduleBuckets {
			if err := tx.DeleteBucket(name); err != nil {
				return err
			}
		}
		info := &storagev1.SchemaInfo{}
		if err := proto.Unmarshal(tx.Bucket(schema.Meta).Get(schema.MetaSchemaKey), info); err != nil {
			return err
		}
		info.Version = 3
		v, err := proto.Marshal(info)
		if err != nil {
			return err
		}
		return tx.Bucket(schema.Meta).Put(schema.MetaSchemaKey, v)
	}); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()

	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Update(context.Background(), func(w store.Writer) error {
		if _, err := w.GetTask("acme", "t0"); err != nil {
			return err
		}
		return w.PutSchedule(storetest.Schedule("acme", "nightly", base))
	}); err != nil {
		t.Fatalf("after the upgrade: %v", err)
	}
	st, err := s.Stats(context.Background())
	if err != nil || st.SchemaVersion != schema.Version {
		t.Fatalf("stats after the upgrade: %v, %v", st.SchemaVersion, err)
	}
}

// TestUpgradeFromVersion4: a version 4 file (no budget bucket) is upgraded to one
// whose budget counts work.
func TestUpgradeFromVersion4(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentplane.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	toVersion(t, path, 4, schema.Budgets)
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	period := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	if err := s.Update(context.Background(), func(w store.Writer) error {
		_, err := w.AddBudgetUsage(storetest.BudgetDelta("acme", "daily", period, 5, 0))
		return err
	}); err != nil {
		t.Fatalf("AddBudgetUsage after the upgrade: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if v := version(t, path); v != schema.Version {
		t.Fatalf("schema version %d after the upgrade", v)
	}
}

// TestUpgradeFromVersion5 opens a store of version 5 (no audit log, no escalation
// index) and can write and read the audit log under version 6; what the store held is
// unchanged.
func TestUpgradeFromVersion5(t *testing.T) {
	for _, wal := range []bool{false, true} {
		t.Run(fmt.Sprintf("wal=%v", wal), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "agentplane.db")
			s, err := Open(path, Options{WAL: wal})
			if err != nil {
				t.Fatal(err)
			}
			base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			if err := s.Update(context.Background(), func(w store.Writer) error { return w.PutTask(storetest.Task("acme", "t1", base)) }); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			files := []string{path}
			if wal {
				files = append(files, filepath.Join(dir, checkpointName))
			}
			for _, f := range files {
				toVersion5(t, f)
			}
			s, err = Open(path, Options{WAL: wal})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Update(context.Background(), func(w store.Writer) error {
				return w.PutAudit(storetest.Audit("acme", base, "alice"))
			}); err != nil {
				t.Fatal(err)
			}
			var got []string
			if err := s.View(context.Background(), func(r store.Reader) error {
				if _, err := r.GetTask("acme", "t1"); err != nil {
					return err
				}
				return r.ScanAudit("acme", "", func(rec *storagev1.AuditRecordEntry) (bool, error) {
					got = append(got, rec.GetRecord().GetPrincipal())
					return true, nil
				})
			}); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != "[alice]" {
				t.Fatalf("audit after the upgrade: %v", got)
			}
			if err := s.Check(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// toVersion5 rewrites a version 6 file into version 5's layout: no audit bucket and
// no escalation index.
func toVersion5(t *testing.T, path string) {
	t.Helper()
	toVersion(t, path, 5, schema.AuditBuckets...)
}

// TestUpgradeFromVersion6 opens a version 6 file (no flow bucket): the upgrade
// creates it, and flow records can then be written and read back.
func TestUpgradeFromVersion6(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentplane.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	toVersion(t, path, 6, schema.Flow)
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := &storagev1.FlowRecord{Holders: []string{"t1"}}
	if err := s.Update(context.Background(), func(w store.Writer) error { return w.PutFlow("acme", "c:default:a", want) }); err != nil {
		t.Fatal(err)
	}
	var got *storagev1.FlowRecord
	if err := s.View(context.Background(), func(r store.Reader) (err error) {
		got, err = r.GetFlow("acme", "c:default:a")
		return err
	}); err != nil || !proto.Equal(got, want) {
		t.Fatalf("flow record after the upgrade = %v, %v", got, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if v := version(t, path); v != schema.Version {
		t.Fatalf("schema version %d after the upgrade", v)
	}
}

// TestUpgradeFromVersion7 opens a version 7 file (no link revocation bucket): the
// upgrade creates it, and revocations can then be written and read back.
func TestUpgradeFromVersion7(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentplane.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	toVersion(t, path, 7, schema.LinkRevocations)
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := &storagev1.LinkRevocationRecord{Tenant: "acme", LinkId: "l1", ExpireTime: timestamppb.Now(), RevokeTime: timestamppb.Now()}
	if err := s.Update(context.Background(), func(w store.Writer) error { return w.PutLinkRevocation(want) }); err != nil {
		t.Fatal(err)
	}
	var got *storagev1.LinkRevocationRecord
	if err := s.View(context.Background(), func(r store.Reader) (err error) {
		got, err = r.GetLinkRevocation("acme", "l1")
		return err
	}); err != nil || !proto.Equal(got, want) {
		t.Fatalf("link revocation after the upgrade = %v, %v", got, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if v := version(t, path); v != schema.Version {
		t.Fatalf("schema version %d after the upgrade", v)
	}
}

// toVersion rewrites the bbolt file at path into an older version's layout: the
// buckets that version did not have are deleted and its schema info says version.
func toVersion(t *testing.T, path string, version int32, missing ...[]byte) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, name := range missing {
			if err := tx.DeleteBucket(name); err != nil {
				return err
			}
		}
		info := &storagev1.SchemaInfo{}
		if err := proto.Unmarshal(tx.Bucket(schema.Meta).Get(schema.MetaSchemaKey), info); err != nil {
			return err
		}
		info.Version = version
		v, err := proto.Marshal(info)
		if err != nil {
			return err
		}
		return tx.Bucket(schema.Meta).Put(schema.MetaSchemaKey, v)
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
