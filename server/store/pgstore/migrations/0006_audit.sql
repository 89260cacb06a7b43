-- Version 6: the approval audit log (docs/hitl.md) and the escalation index.
-- The audit log is append-only; id_key is
-- schema.AuditKey (tenant, then the time-ordered id), so a tenant's log in time order
-- is a range scan, as in bbolt. Rows are not deleted with their task.
CREATE TABLE audit (
  tenant   text  NOT NULL,
  audit_id text  NOT NULL,
  id_key   bytea NOT NULL UNIQUE,
  rec      bytea NOT NULL,
  PRIMARY KEY (tenant, audit_id)
);

-- The escalation index: schema.TimeKey(store.EscalationDue) while an interrupt under
-- an approval rule has an escalation step to run. A new or earlier step wakes the
-- other replicas' timer loops like a deadline does (["t", replica]).
ALTER TABLE interrupts ADD COLUMN escalation_key bytea;
CREATE INDEX interrupts_escalations ON interrupts (escalation_key) WHERE escalation_key IS NOT NULL;
CREATE OR REPLACE FUNCTION agentplane_notify_interrupt() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND OLD.pending_key IS NOT NULL AND NEW.pending_key IS NULL THEN
    PERFORM pg_notify('agentplane', json_build_array('d', current_setting('agentplane.replica', true), NEW.tenant, NEW.interrupt_id)::text);
  END IF;
  IF (NEW.deadline_key IS NOT NULL AND (TG_OP = 'INSERT' OR NEW.deadline_key IS DISTINCT FROM OLD.deadline_key)) OR
     (NEW.escalation_key IS NOT NULL AND (TG_OP = 'INSERT' OR NEW.escalation_key IS DISTINCT FROM OLD.escalation_key)) THEN
    PERFORM pg_notify('agentplane', json_build_array('t', current_setting('agentplane.replica', true))::text);
  END IF;
  RETURN NULL;
END $$;
