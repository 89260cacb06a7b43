package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
)

// TestBudgetCountSurvivesSIGKILL reports model usage to the real binary from
// concurrent runtimes, SIGKILLs it under that load, restarts it on the same data, and
// checks that the budget's count is exactly the usage of the messages the store kept
// (the sum of Task.usage over every task): counted in the transaction of the message,
// never one without the other, and at least everything acknowledged.
func TestBudgetCountSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	const perCall = 7
	configFile := writeConfig(t, `budgets:
  rules:
    - name: daily
      period: day
      max_tokens: 1000000000
`)
	bin := buildBinary(t)
	dataDir := t.TempDir()
	proc := startBinary(t, bin, dataDir, configFile)
	c, err := client.Dial(context.Background(), proc.addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitLimit)
	defer cancel()
	var acked atomic.Int64
	loops := make(chan struct{})
	for w := range 4 {
		go func() {
			defer func() { loops <- struct{}{} }()
			for i := 0; ctx.Err() == nil; i++ {
				if _, err := c.Tasks.StartTask(ctx, startRequest(fmt.Sprintf("b-w%d-%d", w, i))); err != nil {
					return
				}
				resp, err := c.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: fmt.Sprintf("rt-%d", w), MaxTasks: 1, Wait: durationpb.New(200 * time.Millisecond)})
				if err != nil {
					return
				}
				for _, l := range resp.GetLeases() {
					ref := &agentplanev1.LeaseRef{TaskId: l.GetTask().GetTaskId(), LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()}
					msg := client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "step")
					msg.Model, msg.Usage = "test-model", &agentplanev1.TokenUsage{InputTokens: 3, OutputTokens: 4, TotalTokens: perCall}
					if _, err := c.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: ref,
						Events: []*agentplanev1.RuntimeEvent{{Payload: &agentplanev1.RuntimeEvent_Message{Message: msg}}}}); err != nil {
						return
					}
					acked.Add(perCall)
				}
			}
		}()
	}
	for acked.Load() < 60*perCall && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	proc.kill(t)
	for range 4 {
		<-loops
	}
	_ = c.Close()

	proc = startBinary(t, bin, dataDir, configFile)
	defer proc.stop(t)
	c, err = client.Dial(context.Background(), proc.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var sum int64
	token := ""
	for {
		page, err := c.Tasks.ListTasks(ctx, &agentplanev1.ListTasksRequest{PageSize: 500, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range page.GetTasks() {
			sum += int64(task.GetUsage().GetTotalTokens())
		}
		if token = page.GetNextPageToken(); token == "" {
			break
		}
	}
	stats, err := c.Admin.GetStats(ctx, &agentplanev1.GetStatsRequest{})
	if err != nil || len(stats.GetBudgets()) != 1 {
		t.Fatalf("GetStats budgets = %v, %v", stats.GetBudgets(), err)
	}
	used := stats.GetBudgets()[0].GetUsedTokens()
	t.Logf("acknowledged %d tokens before the kill; the store holds messages of %d, the budget counts %d", acked.Load(), sum, used)
	if used != sum || used < acked.Load() {
		t.Fatalf("after SIGKILL the budget counts %d tokens; the kept messages used %d, %d were acknowledged", used, sum, acked.Load())
	}
}
