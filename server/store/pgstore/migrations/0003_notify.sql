-- Version 2: wake-ups for the other replicas (LISTEN agentplane). A notification only
-- says where to look; readers read the tables, so a lost or repeated notification
-- costs a delay or a read, never a record. NOTIFY is sent at COMMIT, only if the
-- transaction commits, and identical payloads of one transaction are sent once.
-- Each payload is a JSON array: the kind, the writing replica (the connection
-- parameter agentplane.replica, so that a replica can skip its own writes), then
-- where to look.

-- Events appended: ["e", replica, tenant, task_id], once per task per statement.
CREATE FUNCTION agentplane_notify_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('agentplane', json_build_array('e', current_setting('agentplane.replica', true), t.tenant, t.task_id)::text)
    FROM (SELECT DISTINCT tenant, task_id FROM appended) t;
  RETURN NULL;
END $$;
CREATE TRIGGER events_notify AFTER INSERT ON events
  REFERENCING NEW TABLE AS appended FOR EACH STATEMENT EXECUTE FUNCTION agentplane_notify_events();

-- A task queued, or queued again: ["q", replica, queue].
CREATE FUNCTION agentplane_notify_queued() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('agentplane', json_build_array('q', current_setting('agentplane.replica', true), NEW.queue)::text);
  RETURN NULL;
END $$;
CREATE TRIGGER tasks_queued_insert AFTER INSERT ON tasks
  FOR EACH ROW WHEN (NEW.queue_key IS NOT NULL) EXECUTE FUNCTION agentplane_notify_queued();
CREATE TRIGGER tasks_queued_update AFTER UPDATE ON tasks
  FOR EACH ROW WHEN (NEW.queue_key IS NOT NULL AND NEW.queue_key IS DISTINCT FROM OLD.queue_key)
  EXECUTE FUNCTION agentplane_notify_queued();

-- An interrupt no longer pending (decided, or closed with its task):
-- ["d", replica, tenant, interrupt_id]; a pending interrupt given a deadline:
-- ["t", replica].
CREATE FUNCTION agentplane_notify_interrupt() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND OLD.pending_key IS NOT NULL AND NEW.pending_key IS NULL THEN
    PERFORM pg_notify('agentplane', json_build_array('d', current_setting('agentplane.replica', true), NEW.tenant, NEW.interrupt_id)::text);
  END IF;
  IF NEW.deadline_key IS NOT NULL AND (TG_OP = 'INSERT' OR NEW.deadline_key IS DISTINCT FROM OLD.deadline_key) THEN
    PERFORM pg_notify('agentplane', json_build_array('t', current_setting('agentplane.replica', true))::text);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER interrupts_notify AFTER INSERT OR UPDATE ON interrupts
  FOR EACH ROW EXECUTE FUNCTION agentplane_notify_interrupt();
