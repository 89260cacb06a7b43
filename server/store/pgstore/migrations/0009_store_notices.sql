-- Version 9: the store sends the other replicas' wake-ups itself, one notification
-- per transaction naming everything it changed (notify.go), where the triggers of
-- version 3 sent one per task and per queue. The format changed with them, so no
-- replica older than this version may run beside a newer one: Open refuses to apply
-- this migration while one is connected (a stop-all upgrade, see docs/operations.md),
-- and an older binary refuses a database of this version.
DROP TRIGGER events_notify ON events;
DROP TRIGGER tasks_queued_insert ON tasks;
DROP TRIGGER tasks_queued_update ON tasks;
DROP TRIGGER interrupts_notify ON interrupts;
DROP FUNCTION agentplane_notify_events();
DROP FUNCTION agentplane_notify_queued();
DROP FUNCTION agentplane_notify_interrupt();
