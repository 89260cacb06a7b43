// Command godriver is the Go SDK's driver of the conformance scenarios
// (testdata/conformance/scenarios.json; sdk/conformance_test.go runs it, and the
// TypeScript and Python drivers beside it). It reads its scenario from
// AGENTPLANE_SCENARIO, connects to AGENTPLANE_ADDRESS with the SDK's defaults, and
// writes what it saw as JSON lines on stdout; a line on stdin lets a scenario go on.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/client/worker"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

type call struct {
	Method  string          `json:"method"`
	Request json.RawMessage `json:"request"`
}

type scenario struct {
	Name   string `json:"name"`
	Calls  []call `json:"calls"`
	TaskID string `json:"task_id"`
	Queue  string `json:"queue"`
}

var out = json.NewEncoder(os.Stdout)
var outMu sync.Mutex

func emit(v any) {
	outMu.Lock()
	defer outMu.Unlock()
	if err := out.Encode(v); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "godriver:", err)
	os.Exit(1)
}

func main() {
	var sc scenario
	if err := json.Unmarshal([]byte(os.Getenv("AGENTPLANE_SCENARIO")), &sc); err != nil {
		fail(fmt.Errorf("AGENTPLANE_SCENARIO: %w", err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, os.Getenv("AGENTPLANE_ADDRESS"))
	if err != nil {
		fail(err)
	}
	defer c.Close()
	switch sc.Name {
	case "retry_after_unavailable", "error_reason_and_metadata":
		for _, cl := range sc.Calls {
			emit(invoke(ctx, c, cl))
		}
	case "watch_across_restart":
		watch(ctx, c, sc.TaskID)
	case "lease_lost_mid_handler":
		leaseLost(ctx, c, sc.Queue)
	default:
		fail(fmt.Errorf("unknown scenario %q", sc.Name))
	}
	emit(map[string]any{"done": true})
}

// invoke makes one call through the client's connection (so through its request ids
// and retries) and reports how it ended.
func invoke(ctx context.Context, c *client.Client, cl call) map[string]any {
	service, method, _ := strings.Cut(cl.Method, "/")
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		fail(err)
	}
	md := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(method))
	req := newMessage(md.Input())
	if err := protojson.Unmarshal(cl.Request, req); err != nil {
		fail(fmt.Errorf("%s request: %w", cl.Method, err))
	}
	callErr := c.Conn().Invoke(ctx, "/"+cl.Method, req, newMessage(md.Output()))
	res := map[string]any{"method": cl.Method}
	if fd := req.ProtoReflect().Descriptor().Fields().ByName("request_id"); fd != nil {
		res["caller_request_id"] = req.ProtoReflect().Get(fd).String()
	}
	for k, v := range describe(callErr) {
		res[k] = v
	}
	return res
}

func newMessage(d protoreflect.MessageDescriptor) proto.Message {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(d.FullName())
	if err != nil {
		fail(err)
	}
	return mt.New().Interface()
}

// describe is how an error decodes: its code's google.rpc.Code name, the ErrorInfo
// (reason, the generated constant's name, whether it is retryable, domain, metadata).
func describe(err error) map[string]any {
	st, _ := status.FromError(err)
	res := map[string]any{"code": codeName(st.Code())}
	if err == nil {
		return res
	}
	res["reason"], res["reason_name"], res["retryable"], res["domain"], res["metadata"] = "", "", false, "", map[string]string{}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			res["reason"], res["domain"] = info.GetReason(), info.GetDomain()
			res["reason_name"], res["retryable"] = client.ReasonName(info.GetReason()), client.RetryableReason(info.GetReason())
			if info.GetMetadata() != nil {
				res["metadata"] = info.GetMetadata()
			}
		}
	}
	return res
}

// codeName is the google.rpc.Code name of c ("FAILED_PRECONDITION").
func codeName(c codes.Code) string {
	switch c {
	case codes.OK:
		return "OK"
	case codes.Canceled:
		return "CANCELLED"
	}
	var b strings.Builder
	for i, r := range c.String() {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

// watch follows the task (Client.Watch) and waits for it (TaskHandle.Wait) at once.
func watch(ctx context.Context, c *client.Client, taskID string) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t, err := c.Task(taskID).Wait(ctx)
		if err != nil {
			emit(map[string]any{"wait_error": err.Error()})
			return
		}
		emit(map[string]any{"wait": t.GetState().String()})
	}()
	stream, err := c.Watch(ctx, taskID, 0)
	if err != nil {
		emit(map[string]any{"watch_error": err.Error()})
	} else {
		for {
			m, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				emit(map[string]any{"watch_error": err.Error()})
				break
			}
			if ev := m.GetEvent(); ev != nil {
				emit(map[string]any{"seq": ev.GetSequence()})
			}
		}
	}
	wg.Wait()
}

// leaseLost runs a worker whose handler, on its first lease, says it started, waits for
// the go-ahead on stdin (the test takes the lease away meanwhile) and writes.
func leaseLost(ctx context.Context, c *client.Client, queue string) {
	lines := bufio.NewScanner(os.Stdin)
	var once sync.Once
	done := make(chan struct{})
	h := worker.HandlerFunc(func(ctx context.Context, t *worker.Task) error {
		first := false
		once.Do(func() { first = true })
		if !first {
			return t.Complete(ctx, &agentplanev1.TaskOutput{})
		}
		emit(map[string]any{"started": map[string]any{"task_id": t.ID(), "lease_id": t.Ref().GetLeaseId(), "epoch": t.Ref().GetEpoch()}})
		lines.Scan()
		err := t.Say(ctx, "still mine?")
		emit(map[string]any{"write_reason": reasonOf(err), "stop_reason": worker.StopReason(ctx)})
		close(done)
		return nil
	})
	w, err := worker.New(c.Runtime, h, worker.Options{RuntimeID: "conformance-go", Queues: []string{queue}, PollWait: time.Second})
	if err != nil {
		fail(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()
	select {
	case <-done:
	case <-ctx.Done():
		fail(ctx.Err())
	}
	stop()
	<-ran
}

// reasonOf is the ErrorInfo reason carried by err (wrapped or not).
func reasonOf(err error) string {
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return ""
	}
	for _, d := range se.GRPCStatus().Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}
