-- Version 7: flow-control state (docs/api.md#flow-control): one row per concurrency
-- key (its slots) or token bucket of a tenant. A writer locks the row it reads (FOR
-- UPDATE), and inserts one it did not find without ON CONFLICT, so that of two
-- transactions creating the same row the second fails on the key and runs again.
CREATE TABLE flow (
  tenant text  NOT NULL,
  name   text  NOT NULL,
  rec    bytea NOT NULL,
  PRIMARY KEY (tenant, name)
);
