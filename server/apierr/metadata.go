package apierr

// ErrorInfo metadata keys. Messages are for people and name the API; clients that
// speak in their own terms (ctl names its commands) build their wording from these.
const (
	// MetaTaskID and MetaInterruptID name the task and interrupt an error is about.
	MetaTaskID      = "task_id"
	MetaInterruptID = "interrupt_id"
	// MetaState is the task's state (a TaskState name) when a call needs another one,
	// MetaWantState.
	MetaState     = "state"
	MetaWantState = "want_state"
	// MetaResolveWith names the RPC that moves the task on (ResolveWith* values).
	MetaResolveWith = "resolve_with"
	// MetaRequiredField names a request field the call needs in this deployment.
	MetaRequiredField = "required_field"
)

// Values of MetaResolveWith.
const (
	ResolveWithContinueTask     = "agentplane.v1.TaskService/ContinueTask"
	ResolveWithResolveInterrupt = "agentplane.v1.HitlService/ResolveInterrupt"
)
