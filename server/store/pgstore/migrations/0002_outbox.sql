-- Version 2: the webhook outbox (docs/notifications.md). One row per notification
-- to one endpoint, written in the transaction of the change it reports, deleted once
-- delivered. due_key is schema.OutboxDueKey while pending (claimed with FOR UPDATE
-- SKIP LOCKED, so replicas take different rows); dead is set for dead letters.
CREATE TABLE outbox (
  id       text  PRIMARY KEY,
  tenant   text  NOT NULL,
  due_key  bytea,
  dead     bool  NOT NULL,
  created  bigint NOT NULL,              -- creation time, Unix nanoseconds
  rec      bytea NOT NULL
);
CREATE INDEX outbox_due ON outbox (due_key) WHERE due_key IS NOT NULL;
CREATE INDEX outbox_dead ON outbox (id) WHERE dead;
CREATE INDEX outbox_by_tenant ON outbox (tenant);
