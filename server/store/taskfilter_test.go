package store_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// TaskMayMatch reads the state, labels and queue of an encoded record as a decode
// would, and passes what it cannot parse (the decode reports it).
func TestTaskMayMatch(t *testing.T) {
	v, err := proto.Marshal(&storagev1.TaskRecord{TaskId: "t", State: agentplanev1.TaskState_TASK_STATE_FAILED,
		Labels: map[string]string{"env": "prod", "team": "a"}, Queue: "q1"})
	if err != nil {
		t.Fatal(err)
	}
	failed, working := agentplanev1.TaskState_TASK_STATE_FAILED, agentplanev1.TaskState_TASK_STATE_WORKING
	for _, c := range []struct {
		r    store.TaskRange
		want bool
	}{
		{store.TaskRange{}, true},
		{store.TaskRange{States: []agentplanev1.TaskState{working, failed}}, true},
		{store.TaskRange{States: []agentplanev1.TaskState{working}}, false},
		{store.TaskRange{Labels: map[string]string{"env": "prod", "team": "a"}}, true},
		{store.TaskRange{Labels: map[string]string{"env": "prod", "team": "b"}}, false},
		{store.TaskRange{Labels: map[string]string{"zone": "prod"}}, false},
		{store.TaskRange{Labels: map[string]string{"env": "prodx"}}, false},
		{store.TaskRange{Queue: "q1"}, true},
		{store.TaskRange{Queue: store.DefaultQueue}, false},
		{store.TaskRange{States: []agentplanev1.TaskState{failed}, Labels: map[string]string{"team": "a"}, Queue: "q1"}, true},
	} {
		if got := store.TaskMayMatch(v, c.r); got != c.want {
			t.Errorf("%+v: %v, want %v", c.r, got, c.want)
		}
	}
	plain, _ := proto.Marshal(&storagev1.TaskRecord{TaskId: "t"})
	if !store.TaskMayMatch(plain, store.TaskRange{Queue: store.DefaultQueue}) {
		t.Error("a task without a queue is not of the default queue")
	}
	if !store.TaskMayMatch([]byte{0xff}, store.TaskRange{Queue: "q1"}) {
		t.Error("an unparseable record was excluded")
	}
}
