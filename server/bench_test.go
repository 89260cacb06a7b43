package server_test

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/api/specwire"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/servertest"
	"github.com/agentplane/agentplane/server/spec"
	"github.com/agentplane/agentplane/server/spec/spectest"
)

// BenchmarkValidateSpecGRPC is ValidateSpec over a real loopback gRPC connection, for
// the same three specs the in-process benchmark in server/spec uses, as a typed
// message and as a document. Run:
//
//	go test ./server -run '^$' -bench ValidateSpecGRPC -benchmem
func BenchmarkValidateSpecGRPC(b *testing.B) {
	in := servertest.Start(b, nil)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		m    proto.Message
	}{
		{"agent", spectest.Agent("researcher", 4)},
		{"graph20", spectest.Graph("", 20, 0)},
		{"nested3", spectest.Graph("", 6, 2)},
	} {
		doc, err := spec.Encode(c.m)
		if err != nil {
			b.Fatal(err)
		}
		object := &agentplanev1.ValidateSpecRequest{Source: &agentplanev1.ValidateSpecRequest_Spec{Spec: specwire.MustStruct(c.m)}}
		for _, v := range []struct {
			name string
			req  *agentplanev1.ValidateSpecRequest
		}{{"object", object}, {"document", &agentplanev1.ValidateSpecRequest{Source: &agentplanev1.ValidateSpecRequest_Document{Document: doc}}}} {
			b.Run(c.name+"/"+v.name, func(b *testing.B) {
				b.SetBytes(int64(len(doc)))
				for b.Loop() {
					resp, err := in.Client.Spec.ValidateSpec(ctx, v.req)
					if err != nil || !resp.GetValid() {
						b.Fatalf("%v %v", resp, err)
					}
				}
			})
		}
	}
}
