package boltstore

import (
	"fmt"

	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
)

func (r reader) GetFlow(tenant, name string) (*storagev1.FlowRecord, error) {
	key, err := flowKey(tenant, name)
	if err != nil {
		return nil, err
	}
	v := r.bucket(schema.Flow).Get(key)
	if v == nil {
		return nil, nil
	}
	rec := &storagev1.FlowRecord{}
	return rec, unmarshal(v, rec, "flow record", key)
}

func (r reader) ScanFlows(fn func(tenant, name string, rec *storagev1.FlowRecord) (bool, error)) error {
	c := r.bucket(schema.Flow).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		tenant, name, ok := schema.DecodeFlowKey(k)
		if !ok {
			return fmt.Errorf("store: flow record key %x is malformed", k)
		}
		rec := &storagev1.FlowRecord{}
		if err := unmarshal(v, rec, "flow record", k); err != nil {
			return err
		}
		if more, err := fn(tenant, name, rec); err != nil || !more {
			return err
		}
	}
	return nil
}

// PutFlow needs no lock: the bbolt store has one writer at a time.
func (w *writer) PutFlow(tenant, name string, rec *storagev1.FlowRecord) error {
	key, err := flowKey(tenant, name)
	if err != nil {
		return err
	}
	if rec == nil {
		return w.del(schema.Flow, key)
	}
	return w.put(schema.Flow, key, rec)
}

func flowKey(tenant, name string) ([]byte, error) {
	if err := store.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if !schema.ValidComponent(name) {
		return nil, fmt.Errorf("store: flow record name of %d bytes (1 to %d)", len(name), schema.MaxComponent)
	}
	return schema.FlowKey(tenant, name), nil
}
