package boltstore

import (
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/schema"
)

// upgrade brings a store written by an earlier schema version to schema.Version in
// one fsynced bbolt transaction, and reports whether it changed anything. It runs
// after the write-ahead log (if any) is replayed, since the log's records are in the
// layout of the version that wrote them, and before the log restarts.
//
// Version 1 to 2: the run queue moves from bucket "queue", keyed (tenant, time, id),
// to "run_queue", keyed (tenant, queue, time, id), every entry in the default queue,
// and the per-queue depth counters are counted. Version 2 to 3: the outbox buckets
// are created (empty). Version 3 to 4: the schedule buckets are created (empty). Version 4 to 5:
// the budget bucket is created (empty). Version 5 to 6: the audit bucket and the escalation
// index are created (empty). Version 6 to 7: the flow bucket is created (empty). Version 7 to 8: the
// link revocation bucket is created (empty).
func (s *Store) upgrade() (bool, error) {
	upgraded := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		info, err := s.readSchema(tx)
		if err != nil {
			return err
		}
		if info == nil || info.GetVersion() == schema.Version {
			return nil
		}
		if v := info.GetVersion(); v < 1 || v > schema.Version-1 {
			return fmt.Errorf("store %s: no upgrade from schema version %d", s.path, info.GetVersion())
		}
		for _, name := range slices.Concat(schema.OutboxBuckets, schema.ScheduleBuckets, schema.BudgetBuckets, schema.AuditBuckets, schema.FlowBuckets, schema.LinkBuckets) {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		runQueue, err := tx.CreateBucketIfNotExists(schema.RunQueue)
		if err != nil {
			return err
		}
		depth := map[string]int64{}
		if old := tx.Bucket(schema.QueueV1); old != nil {
			err := old.ForEach(func(k, _ []byte) error {
				tenant, at, id, ok := schema.DecodeTimeKey(k)
				if !ok {
					return fmt.Errorf("store %s: malformed version 1 queue key %x", s.path, k)
				}
				depth[tenant]++
				return runQueue.Put(schema.QueueKey(tenant, store.DefaultQueue, at, id), nil)
			})
			if err != nil {
				return err
			}
			if err := tx.DeleteBucket(schema.QueueV1); err != nil {
				return err
			}
		}
		counters := tx.Bucket(schema.Counters)
		for tenant, n := range depth {
			if err := counters.Put(schema.CounterKey(tenant, schema.CounterQueueDepth+store.DefaultQueue), schema.EncodeCount(n)); err != nil {
				return err
			}
		}
		info.Version = schema.Version
		v, err := proto.Marshal(info)
		if err != nil {
			return err
		}
		upgraded = true
		return tx.Bucket(schema.Meta).Put(schema.MetaSchemaKey, v)
	})
	if upgraded {
		s.log.Info("store upgraded", "path", s.path, "schema_version", schema.Version)
	}
	return upgraded, err
}
