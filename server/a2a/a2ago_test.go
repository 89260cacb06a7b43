package a2a_test

import (
	"context"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
)

// TestA2AGoClient: a2a-go v0.3.3's client, which speaks A2A 0.3 (message/send,
// message/stream, tasks/get, tasks/cancel, tasks/resubscribe), reads the card and
// drives the face through the 0.3 names.
func TestA2AGoClient(t *testing.T) {
	f := startFace(t, nil, nil)
	f.runtime(t, "helpdesk", "", scriptRunner(t, helloScript))
	f.runtime(t, "calc", "", scriptRunner(t, approvalScript))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	card, err := agentcard.DefaultResolver.Resolve(ctx, f.base)
	if err != nil {
		t.Fatal(err)
	}
	if card.Name != "helpdesk" || card.PreferredTransport != a2a.TransportProtocolJSONRPC || !card.Capabilities.Streaming {
		t.Fatalf("card: %+v", card)
	}
	c, err := a2aclient.NewFromCard(ctx, card)
	if err != nil {
		t.Fatal(err)
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "weather in Paris?"})
	res, err := c.SendMessage(ctx, &a2a.MessageSendParams{Message: msg})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateCompleted || len(task.Artifacts) == 0 {
		t.Fatalf("send: %#v", res)
	}
	again, err := c.SendMessage(ctx, &a2a.MessageSendParams{Message: msg})
	if err != nil || again.(*a2a.Task).ID != task.ID {
		t.Fatalf("retry: %v %v", again, err)
	}
	got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCompleted || got.ContextID != task.ContextID {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: "no-such-task"}); err == nil {
		t.Fatal("get of a missing task succeeded")
	}
	var kinds []string
	for ev, err := range c.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "hi"})}) {
		if err != nil {
			t.Fatal(err)
		}
		switch e := ev.(type) {
		case *a2a.Task:
			kinds = append(kinds, "task")
		case *a2a.TaskArtifactUpdateEvent:
			kinds = append(kinds, "artifact")
		case *a2a.TaskStatusUpdateEvent:
			kinds = append(kinds, string(e.Status.State))
			if e.Final && e.Status.State != a2a.TaskStateCompleted {
				t.Fatalf("final status %s", e.Status.State)
			}
		}
	}
	if len(kinds) < 3 || kinds[0] != "task" || kinds[len(kinds)-1] != "completed" {
		t.Fatalf("stream: %v", kinds)
	}

	// The gated agent: working while a person decides, resubscribed, canceled.
	calcCard, err := agentcard.DefaultResolver.Resolve(ctx, f.base+"/a2a/calculator")
	if err != nil {
		t.Fatal(err)
	}
	cc, err := a2aclient.NewFromCard(ctx, calcCard)
	if err != nil {
		t.Fatal(err)
	}
	gated := &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "email"}), Metadata: gateSendEmail,
		Config: &a2a.MessageSendConfig{Blocking: new(false)}}
	res, err = cc.SendMessage(ctx, gated)
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	f.waitTask(t, "calculator", "", string(id), func(a a2aTask) bool { return a.Status.State == "TASK_STATE_WORKING" && a.Status.Message != nil })
	var first a2a.Event
	for ev, err := range cc.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: id}) {
		if err != nil {
			t.Fatal(err)
		}
		first = ev
		break
	}
	if tk, ok := first.(*a2a.Task); !ok || tk.Status.State != a2a.TaskStateWorking || tk.Status.Message == nil {
		t.Fatalf("resubscribe: first event %#v", first)
	}
	if _, err := cc.CancelTask(ctx, &a2a.TaskIDParams{ID: id}); err != nil {
		t.Fatal(err)
	}
	f.waitTask(t, "calculator", "", string(id), func(a a2aTask) bool { return a.Status.State == "TASK_STATE_CANCELED" })
	if _, err := cc.CancelTask(ctx, &a2a.TaskIDParams{ID: task.ID}); err == nil {
		t.Fatal("canceling another agent's task succeeded")
	}
}
