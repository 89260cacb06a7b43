// Package schedules starts tasks on a schedule (ScheduleService): cron expressions in
// a time zone, fixed intervals with an offset, one-shot times, with deterministic
// jitter, an overlap policy and a catch-up window.
//
// Guarantee: each nominal time of a schedule is acted on exactly once. The scheduler
// creates the run's task (through tasks.Manager.StartIn, under a request id derived
// from the schedule, its creation and the nominal time) in the same store transaction
// that advances the schedule past that nominal time, after locking the schedule
// (TryLockSchedule: FOR UPDATE SKIP LOCKED on PostgreSQL) and checking that its
// revision is the one it prepared the run from. A crash before the commit leaves
// neither; a replica that loses the race finds the schedule locked or advanced. The
// derived request id is the second line: a run started again for a nominal time finds
// the task of the first.
//
// Every replica runs the scheduler loop (Start); they share the due index and take
// different schedules.
package schedules
