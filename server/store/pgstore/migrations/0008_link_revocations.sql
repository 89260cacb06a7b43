-- Version 8: revocations of single approval links (docs/hitl.md#signed-links). One
-- row per (tenant, link id), kept until the link would have expired anyway:
-- PutLinkRevocation drops the tenant's expired rows (expire_time) as it adds one.
CREATE TABLE link_revocations (
  tenant      text        NOT NULL,
  link_id     text        NOT NULL,
  expire_time timestamptz NOT NULL,
  rec         bytea       NOT NULL,
  PRIMARY KEY (tenant, link_id)
);
CREATE INDEX link_revocations_expiry ON link_revocations (tenant, expire_time);
