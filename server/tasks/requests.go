package tasks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// maxAppliedRequests is how many request ids a task remembers of each kind of caller
// (TaskRecord.applied_requests): clients' calls (ContinueTask, CancelTask,
// ResolveInterrupt) and runtimes' lease-fenced writes are counted apart, so that a busy
// runtime's reports cannot push out the id of a ContinueTask whose retry arrives after
// the task moved on to its next turn. A retry comes seconds after its call; a caller
// that makes more than this many other keyed calls on one task in between loses the
// protection for the oldest. Every runtime write rewrites the task record, which
// carries the list, so it is kept short (and digests are truncated to 16 bytes).
const maxAppliedRequests = 16

// digestBytes is how much of a request's SHA-256 is kept: enough to tell two requests
// apart, not to resist a forger, who could only confuse their own retries.
const digestBytes = 16

// Request names a mutating call on a task made under a caller's request id, so that a
// retry of it is answered from what the first call did instead of being applied again.
// The zero Request (no id) is applied every time.
type Request struct {
	// ID is the caller's request id; "" disables the check.
	ID string
	// Digest identifies the request the ID was first used with.
	Digest []byte
}

// NewRequest is the Request of msg under its request_id field: the digest covers the
// message's type and every field but request_id. A request_id over 128 bytes or not
// valid UTF-8 is INVALID_ARGUMENT. msg must have a string field request_id.
func NewRequest(msg proto.Message) (Request, error) {
	r := msg.ProtoReflect()
	fd := r.Descriptor().Fields().ByName("request_id")
	if fd == nil {
		panic("tasks: " + string(r.Descriptor().FullName()) + " has no request_id")
	}
	id := r.Get(fd).String()
	if id == "" {
		return Request{}, nil
	}
	if len(id) > maxIDBytes || !utf8.ValidString(id) {
		return Request{}, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "request_id must be valid UTF-8 of at most %d bytes", maxIDBytes)
	}
	c := proto.Clone(msg)
	c.ProtoReflect().Clear(fd)
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(c) // valid messages always encode
	h := sha256.New()
	h.Write([]byte(r.Descriptor().FullName()))
	h.Write([]byte{0})
	h.Write(b)
	return Request{ID: id, Digest: h.Sum(nil)[:digestBytes]}, nil
}

// Replay is how a retried call answers from the first call's record: op is the task
// as it is now (read it, change nothing), a what the first call recorded with
// Op.SetResult.
type Replay func(op *Op, a *storagev1.AppliedRequest) error

// applied returns the task's record of req, nil when the task has none; the same id
// with another digest is ALREADY_EXISTS (TASK_REQUEST_ID_REUSED).
func (o *Op) applied(req Request) (*storagev1.AppliedRequest, error) {
	if req.ID == "" {
		return nil, nil
	}
	for _, a := range o.rec.GetAppliedRequests() {
		if a.GetRequestId() != req.ID {
			continue
		}
		if !bytes.Equal(a.GetDigest(), req.Digest) {
			return nil, apierr.New(codes.AlreadyExists, apierr.ReasonRequestIDReused,
				"request_id %q was already used for a different request on task %s; use a new request_id for a new request",
				req.ID, o.rec.GetTaskId())
		}
		return a, nil
	}
	return nil, nil
}

// SetResult records what a keyed call returned that the task record does not hold
// (an interrupt id, a sequence), for its retries (see Replay).
func (o *Op) SetResult(id string, sequence int64) {
	o.result = &storagev1.AppliedRequest{ResultId: id, ResultSequence: sequence}
}

// remember records req, with what fn set with SetResult, as applied to the task, and
// forgets the oldest request of the same kind (fenced or not) past maxAppliedRequests.
func (o *Op) remember(req Request, fenced bool) {
	if req.ID == "" {
		return
	}
	a := &storagev1.AppliedRequest{RequestId: req.ID, Digest: req.Digest, Fenced: fenced}
	if o.result != nil {
		a.ResultId, a.ResultSequence = o.result.GetResultId(), o.result.GetResultSequence()
	}
	o.touched = true
	list := append(o.rec.GetAppliedRequests(), a)
	kept := 0
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].GetFenced() == fenced {
			if kept++; kept > maxAppliedRequests {
				list = append(list[:i:i], list[i+1:]...)
				break
			}
		}
	}
	o.rec.AppliedRequests = list
}

// UpdateTaskOnce is UpdateTask for a call made under req: when the task already
// applied req, replay answers instead of fn and nothing is written; otherwise fn runs
// and req is recorded with the change.
func (m *Manager) UpdateTaskOnce(ctx context.Context, tenant, taskID string, req Request, fn func(*Op) error, replay Replay) error {
	now := m.clock.Now()
	return m.store.Update(ctx, func(w store.Writer) error {
		rec, err := w.GetTask(tenant, taskID)
		if err != nil {
			return err
		}
		op := m.newOp(w, now, rec)
		if a, err := op.applied(req); err != nil || a != nil {
			if err != nil {
				return err
			}
			return replay(op, a)
		}
		if err := fn(op); err != nil {
			return err
		}
		op.remember(req, false)
		return op.flush()
	})
}

// UpdateLeasedOnce is UpdateLeased for a call made under req: when the task already
// applied req, replay answers instead of fn, whatever became of the lease since (the
// first call may have released it or ended the task), and nothing is written;
// otherwise the call is fenced and applied like UpdateLeased, and req is recorded with
// the change.
func (m *Manager) UpdateLeasedOnce(ctx context.Context, ref *agentplanev1.LeaseRef, req Request, fn func(*Op) error, replay Replay) error {
	return m.updateLeased(ctx, ref, false, req, fn, replay)
}
