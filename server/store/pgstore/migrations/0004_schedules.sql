-- Version 4: schedules (docs/schedules.md). One row per schedule; due_key is
-- schema.ScheduleDueKey(wake time, tenant, id) while the scheduler has something to
-- do for it. Replicas lock the row they fire (FOR UPDATE SKIP LOCKED) and advance it
-- in the transaction that creates the run's task.
CREATE TABLE schedules (
  tenant      text  NOT NULL,
  schedule_id text  NOT NULL,
  due_key     bytea,
  rec         bytea NOT NULL,
  PRIMARY KEY (tenant, schedule_id)
);
CREATE INDEX schedules_due ON schedules (due_key) WHERE due_key IS NOT NULL;
