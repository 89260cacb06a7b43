package pgstore

import (
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

func (r *reader) GetLinkRevocation(tenant, linkID string) (*storagev1.LinkRevocationRecord, error) {
	if err := store.CheckLinkID(tenant, linkID); err != nil {
		return nil, err
	}
	v, ok, err := r.get("SELECT rec FROM link_revocations WHERE tenant = $1 AND link_id = $2", tenant, linkID)
	if err != nil || !ok {
		return nil, err
	}
	rec := &storagev1.LinkRevocationRecord{}
	return rec, unmarshal(v, rec, "link revocation", tenant+"/"+linkID)
}

func (w *writer) PutLinkRevocation(rec *storagev1.LinkRevocationRecord) error {
	if err := store.CheckLinkRevocation(rec); err != nil {
		return err
	}
	v, err := encode(rec)
	if err != nil {
		return err
	}
	if _, err := w.exec(`DELETE FROM link_revocations WHERE (tenant, link_id) IN (
		SELECT tenant, link_id FROM link_revocations WHERE tenant = $1 AND expire_time < $2 LIMIT $3)`,
		rec.GetTenant(), rec.GetRevokeTime().AsTime(), store.MaxLinkRevocationPrune); err != nil {
		return err
	}
	_, err = w.exec(`INSERT INTO link_revocations (tenant, link_id, expire_time, rec) VALUES ($1, $2, $3, $4)
		ON CONFLICT (tenant, link_id) DO UPDATE SET expire_time = EXCLUDED.expire_time, rec = EXCLUDED.rec`,
		rec.GetTenant(), rec.GetLinkId(), rec.GetExpireTime().AsTime(), v)
	return err
}

func (r *reader) ScanLinkRevocations(fn func(*storagev1.LinkRevocationRecord) (bool, error)) error {
	return r.scanByTenant("link_revocations", "link_id", func(tenant, id string, v []byte) (bool, error) {
		rec := &storagev1.LinkRevocationRecord{}
		if err := unmarshal(v, rec, "link revocation", tenant+"/"+id); err != nil {
			return false, err
		}
		return fn(rec)
	})
}
