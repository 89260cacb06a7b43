package server_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/servertest"
)

// BenchmarkStartTaskGRPC is StartTask over loopback gRPC with 64 concurrent callers
// on a real bbolt file (ctl bench start measures the same from outside the process).
//
//	go test ./server -run '^$' -bench StartTaskGRPC -cpuprofile cpu.out
func BenchmarkStartTaskGRPC(b *testing.B) {
	in := servertest.Start(b, nil)
	agent := &agentplanev1.AgentSpec{ApiVersion: "qar/v1", Kind: "AgentSpec", Model: "m",
		Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "Answer briefly."}}}
	var n atomic.Int64
	b.SetParallelism(32) // 64 callers on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			_, err := in.Client.Tasks.StartTask(context.Background(), &agentplanev1.StartTaskRequest{
				RequestId: fmt.Sprintf("r%d", i), Spec: &agentplanev1.StartTaskRequest_Agent{Agent: agent}, Input: client.UserText("bench"),
			})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
}
