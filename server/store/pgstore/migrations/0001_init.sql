-- Version 1 of the PostgreSQL layout. Values are agentplane.storage.v1 messages
-- (bytea), as in the bbolt store; the *_key columns hold the same byte keys the
-- bbolt store orders its indexes by (package schema), so scans and page cursors are
-- the same on both backends.
CREATE TABLE meta (
  name  text PRIMARY KEY,
  value bytea NOT NULL
);

CREATE TABLE tasks (
  tenant       text   NOT NULL,
  task_id      text   NOT NULL,
  state        int    NOT NULL,
  queue        text   NOT NULL,
  create_key   bytea  NOT NULL,          -- schema.TaskByCreateKey: newest first
  queue_key    bytea,                    -- schema.QueueKey while queued
  lease_key    bytea,                    -- schema.TimeKey(lease deadline) while leased
  ended_key    bytea,                    -- schema.TimeKey(end time) once terminal
  rec          bytea  NOT NULL,
  PRIMARY KEY (tenant, task_id)
);
CREATE UNIQUE INDEX tasks_by_create ON tasks (create_key);
CREATE INDEX tasks_queued ON tasks (queue_key) WHERE queue_key IS NOT NULL;
CREATE INDEX tasks_leased ON tasks (lease_key) WHERE lease_key IS NOT NULL;
CREATE INDEX tasks_ended ON tasks (ended_key) WHERE ended_key IS NOT NULL;

CREATE TABLE task_specs (
  tenant  text  NOT NULL,
  task_id text  NOT NULL,
  spec    bytea NOT NULL,
  PRIMARY KEY (tenant, task_id)
);

CREATE TABLE requests (
  tenant     text NOT NULL,
  request_id text NOT NULL,
  task_id    text NOT NULL,
  PRIMARY KEY (tenant, request_id)
);

CREATE TABLE events (
  tenant  text   NOT NULL,
  task_id text   NOT NULL,
  seq     bigint NOT NULL,
  rec     bytea  NOT NULL,
  PRIMARY KEY (tenant, task_id, seq)
);

CREATE TABLE interrupts (
  tenant       text  NOT NULL,
  interrupt_id text  NOT NULL,
  task_id      text  NOT NULL,
  id_key       bytea NOT NULL,           -- schema.InterruptKey: id order as in bbolt
  pending_key  bytea,                    -- schema.TimeKey(create time) while pending
  deadline_key bytea,                    -- schema.TimeKey(deadline) while pending
  rec          bytea NOT NULL,
  PRIMARY KEY (tenant, interrupt_id)
);
CREATE UNIQUE INDEX interrupts_by_id ON interrupts (id_key);
CREATE INDEX interrupts_by_task ON interrupts (tenant, task_id);
CREATE INDEX interrupts_pending ON interrupts (pending_key) WHERE pending_key IS NOT NULL;
CREATE INDEX interrupts_deadlines ON interrupts (deadline_key) WHERE deadline_key IS NOT NULL;

CREATE TABLE verdicts (
  tenant  text   NOT NULL,
  task_id text   NOT NULL,
  seq     bigint NOT NULL,
  rec     bytea  NOT NULL,
  PRIMARY KEY (tenant, task_id, seq)
);

CREATE TABLE obligations (
  tenant  text   NOT NULL,
  task_id text   NOT NULL,
  ordinal bigint NOT NULL,
  rec     bytea  NOT NULL,
  PRIMARY KEY (tenant, task_id, ordinal)
);
