package boltstore

import (
	"bytes"

	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
)

func (r reader) GetLinkRevocation(tenant, linkID string) (*storagev1.LinkRevocationRecord, error) {
	if err := store.CheckLinkID(tenant, linkID); err != nil {
		return nil, err
	}
	key := schema.LinkRevocationKey(tenant, linkID)
	v := r.bucket(schema.LinkRevocations).Get(key)
	if v == nil {
		return nil, nil
	}
	rec := &storagev1.LinkRevocationRecord{}
	return rec, unmarshal(v, rec, "link revocation", key)
}

// PutLinkRevocation scans the tenant's revocations for expired ones: there are no
// more of them than links revoked within one link TTL.
func (w *writer) PutLinkRevocation(rec *storagev1.LinkRevocationRecord) error {
	if err := store.CheckLinkRevocation(rec); err != nil {
		return err
	}
	now := rec.GetRevokeTime().AsTime()
	prefix := schema.TenantPrefix(rec.GetTenant())
	var expired [][]byte
	c := w.bucket(schema.LinkRevocations).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(expired) < store.MaxLinkRevocationPrune; k, v = c.Next() {
		old := &storagev1.LinkRevocationRecord{}
		if err := unmarshal(v, old, "link revocation", k); err != nil {
			return err
		}
		if old.GetExpireTime().AsTime().Before(now) {
			expired = append(expired, bytes.Clone(k))
		}
	}
	for _, k := range expired {
		if err := w.del(schema.LinkRevocations, k); err != nil {
			return err
		}
	}
	return w.put(schema.LinkRevocations, schema.LinkRevocationKey(rec.GetTenant(), rec.GetLinkId()), rec)
}

func (r reader) ScanLinkRevocations(fn func(*storagev1.LinkRevocationRecord) (bool, error)) error {
	c := r.bucket(schema.LinkRevocations).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		rec := &storagev1.LinkRevocationRecord{}
		if err := unmarshal(v, rec, "link revocation", k); err != nil {
			return err
		}
		if more, err := fn(rec); err != nil || !more {
			return err
		}
	}
	return nil
}
