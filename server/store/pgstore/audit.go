package pgstore

import (
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
)

func auditRow(row pgx.CollectableRow) (*storagev1.AuditRecordEntry, []byte, error) {
	var k, v []byte
	if err := row.Scan(&k, &v); err != nil {
		return nil, nil, err
	}
	rec := &storagev1.AuditRecordEntry{}
	return rec, k, unmarshal(v, rec, "audit record", fmt.Sprintf("%x", k))
}

func (r *reader) ScanAudit(tenant, after string, fn func(*storagev1.AuditRecordEntry) (bool, error)) error {
	if err := store.CheckTenant(tenant); err != nil {
		return err
	}
	prefix := schema.TenantPrefix(tenant)
	from, exclusive := prefix, false
	if after != "" {
		if len(after) > schema.MaxComponent {
			return apierr.InvalidArgument(apierr.ReasonPageTokenInvalid, "page cursor does not belong to this listing")
		}
		from, exclusive = schema.AuditKey(tenant, after), true
	}
	return scanKeys(r, "SELECT id_key, rec FROM audit WHERE id_key %s $1 AND id_key < $2 ORDER BY id_key LIMIT $3",
		from, exclusive, schema.PrefixEnd(prefix), 0, auditRow, fn)
}

func (w *writer) PutAudit(rec *storagev1.AuditRecordEntry) error {
	if err := store.CheckAuditRecord(rec); err != nil {
		return err
	}
	v, err := encode(rec)
	if err != nil {
		return err
	}
	r := rec.GetRecord()
	n, err := w.exec(`INSERT INTO audit (tenant, audit_id, id_key, rec) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
		r.GetTenant(), r.GetAuditId(), schema.AuditKey(r.GetTenant(), r.GetAuditId()), v)
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrAuditExists(r.GetAuditId())
	}
	return nil
}
