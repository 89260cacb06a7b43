-- Version 4: the approval audit log (docs/hitl.md). Append-only; id_key is
-- schema.AuditKey (tenant, then the time-ordered id), so a tenant's log in time order
-- is a range scan, as in bbolt. Rows are not deleted with their task.
CREATE TABLE audit (
  tenant   text  NOT NULL,
  audit_id text  NOT NULL,
  id_key   bytea NOT NULL UNIQUE,
  rec      bytea NOT NULL,
  PRIMARY KEY (tenant, audit_id)
);
