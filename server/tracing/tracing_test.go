package tracing

import (
	"context"
	"testing"

	"github.com/agentplane/agentplane/server/config"
)

// TestNew: tracing is on only when an endpoint is configured or in the environment,
// the config wins, a base URL gets /v1/traces and a traces URL is taken as it is, and
// OTEL_SDK_DISABLED turns it off.
func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     config.Tracing
		env     map[string]string
		want    string // the endpoint; "" for off
		wantErr bool
	}{
		{name: "off by default"},
		{name: "config base URL", cfg: config.Tracing{OTLPEndpoint: "http://127.0.0.1:4318"}, want: "http://127.0.0.1:4318/v1/traces"},
		{name: "config over env", cfg: config.Tracing{OTLPEndpoint: "http://a:4318/otlp/"}, env: map[string]string{EnvEndpoint: "http://b:4318"}, want: "http://a:4318/otlp/v1/traces"},
		{name: "env base URL", env: map[string]string{EnvEndpoint: "http://b:4318"}, want: "http://b:4318/v1/traces"},
		{name: "env traces URL as is", env: map[string]string{EnvEndpoint: "http://b:4318", EnvTracesEndpoint: "http://c:9/x"}, want: "http://c:9/x"},
		{name: "grpc", cfg: config.Tracing{OTLPEndpoint: "http://127.0.0.1:4317", Protocol: "grpc"}, want: "http://127.0.0.1:4317"},
		{name: "grpc from env", env: map[string]string{EnvEndpoint: "http://b:4317", EnvProtocol: "grpc"}, want: "http://b:4317"},
		{name: "disabled", cfg: config.Tracing{OTLPEndpoint: "http://127.0.0.1:4318"}, env: map[string]string{EnvSDKDisabled: "true"}},
		{name: "bad protocol", cfg: config.Tracing{OTLPEndpoint: "http://127.0.0.1:4318", Protocol: "thrift"}, wantErr: true},
		{name: "bad env protocol", env: map[string]string{EnvEndpoint: "http://b:4318", EnvProtocol: "thrift"}, wantErr: true},
		{name: "bad config URL", cfg: config.Tracing{OTLPEndpoint: "127.0.0.1:4318"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(context.Background(), tc.cfg, "test", func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if tc.wantErr {
				if err == nil {
					t.Fatalf("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer p.Shutdown(context.Background())
			if p.Enabled() != (tc.want != "") || p.Endpoint() != tc.want {
				t.Errorf("enabled %v endpoint %q, want %q", p.Enabled(), p.Endpoint(), tc.want)
			}
		})
	}
}
