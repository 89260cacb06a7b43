package pgstore

import (
	"github.com/jackc/pgx/v5"

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
	afterTenant, afterID := "", ""
	for {
		type row struct {
			Tenant, LinkID string
			Rec            []byte
		}
		page, err := collect(r, `SELECT tenant, link_id, rec FROM link_revocations WHERE (tenant, link_id) > ($1, $2)
			ORDER BY tenant, link_id LIMIT $3`, []any{afterTenant, afterID, pageSize}, pgx.RowToStructByPos[row])
		if err != nil {
			return err
		}
		for _, p := range page {
			rec := &storagev1.LinkRevocationRecord{}
			if err := unmarshal(p.Rec, rec, "link revocation", p.Tenant+"/"+p.LinkID); err != nil {
				return err
			}
			if more, err := fn(rec); err != nil || !more {
				return err
			}
		}
		if len(page) < pageSize {
			return nil
		}
		afterTenant, afterID = page[len(page)-1].Tenant, page[len(page)-1].LinkID
	}
}
