package boltstore

import (
	"bytes"

	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
)

func (r reader) ScanAudit(tenant, after string, fn func(*storagev1.AuditRecordEntry) (bool, error)) error {
	if err := store.CheckTenant(tenant); err != nil {
		return err
	}
	prefix := schema.TenantPrefix(tenant)
	c := r.bucket(schema.Audit).Cursor()
	k, v := c.Seek(prefix)
	if after != "" {
		start := schema.AuditKey(tenant, after)
		if k, v = c.Seek(start); bytes.Equal(k, start) {
			k, v = c.Next()
		}
	}
	for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		rec := &storagev1.AuditRecordEntry{}
		if err := unmarshal(v, rec, "audit record", k); err != nil {
			return err
		}
		if more, err := fn(rec); err != nil || !more {
			return err
		}
	}
	return nil
}

func (w *writer) PutAudit(rec *storagev1.AuditRecordEntry) error {
	if err := store.CheckAuditRecord(rec); err != nil {
		return err
	}
	key := schema.AuditKey(rec.GetRecord().GetTenant(), rec.GetRecord().GetAuditId())
	if w.bucket(schema.Audit).Get(key) != nil {
		return store.ErrAuditExists(rec.GetRecord().GetAuditId())
	}
	return w.put(schema.Audit, key, rec)
}
