package main

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	_ "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// compiledSet is the agentplane.v1 files as compiled into gen (no source info).
func compiledSet(t *testing.T) *descriptorpb.FileDescriptorSet {
	t.Helper()
	set := &descriptorpb.FileDescriptorSet{}
	protoregistry.GlobalFiles.RangeFilesByPackage("agentplane.v1", func(f protoreflect.FileDescriptor) bool {
		set.File = append(set.File, protodesc.ToFileDescriptorProto(f))
		return true
	})
	return set
}

func TestReadFindsEveryRPCAndReason(t *testing.T) {
	rpcs, reasons, err := read(compiledSet(t))
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]rpc{}
	for _, r := range rpcs {
		byKey[r.Key] = r
	}
	if r := byKey["agentplane.v1.TaskService/StartTask"]; r.Idempotency != descriptorpb.MethodOptions_IDEMPOTENT || !r.RequestID {
		t.Errorf("StartTask: %+v", r)
	}
	if r := byKey["agentplane.v1.TaskService/WatchTask"]; r.Idempotency != descriptorpb.MethodOptions_NO_SIDE_EFFECTS || !r.ServerStreaming {
		t.Errorf("WatchTask: %+v", r)
	}
	if r, ok := byKey["agentplane.v1.RuntimeService/LeaseTasks"]; !ok || r.Idempotency != descriptorpb.MethodOptions_IDEMPOTENCY_UNKNOWN {
		t.Errorf("LeaseTasks: %+v", r)
	}
	found := false
	for _, r := range reasons {
		if r.Name == "LIMIT_CONCURRENCY" {
			found = r.Retryable
		}
		if r.Wire == "" || strings.HasPrefix(r.Name, "ERROR_REASON_") {
			t.Errorf("reason %+v", r)
		}
	}
	if !found {
		t.Error("LIMIT_CONCURRENCY is not read as retryable")
	}
	// Every SDK's file names every RPC and reason.
	for name, out := range map[string]string{"go": renderGo(rpcs, reasons), "ts": renderTS(rpcs, reasons), "py": renderPy(rpcs, reasons)} {
		for _, r := range rpcs {
			if !strings.Contains(out, r.Key) {
				t.Errorf("%s output lacks %s", name, r.Key)
			}
		}
		for _, r := range reasons {
			if !strings.Contains(out, `"`+r.Wire+`"`) {
				t.Errorf("%s output lacks reason %s", name, r.Wire)
			}
		}
	}
}

// TestReadRefusesARequestIDWithoutALevel: a write with a request_id that its RPC does not
// mark IDEMPOTENT would silently lose its retries; the generator refuses it.
func TestReadRefusesARequestIDWithoutALevel(t *testing.T) {
	set := compiledSet(t)
	for _, f := range set.GetFile() {
		for _, s := range f.GetService() {
			for _, m := range s.GetMethod() {
				if m.GetName() == "StartTask" {
					m.Options = proto.CloneOf(m.GetOptions())
					m.Options.IdempotencyLevel = nil
				}
			}
		}
	}
	if _, _, err := read(set); err == nil || !strings.Contains(err.Error(), "StartTask") {
		t.Fatalf("read = %v; want StartTask refused", err)
	}
}
