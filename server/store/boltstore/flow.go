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
