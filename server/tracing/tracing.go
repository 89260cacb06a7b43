// Package tracing sets up OpenTelemetry traces for agentplane's processes (the
// control plane and the reference runtime): an OTLP exporter when one is configured,
// a no-op tracer otherwise, and gRPC interceptors that carry the W3C trace context
// across calls (server spans on the control plane, propagation from the runtime).
//
// Tracing is off unless config.Tracing.OTLPEndpoint or the standard
// OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set; then the
// OpenTelemetry SDK's own environment variables (OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER, OTEL_BSP_*, OTEL_EXPORTER_OTLP_HEADERS)
// apply as everywhere else. OTEL_SDK_DISABLED=true turns it off.
package tracing

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentplane/agentplane/server/config"
)

// Provider is a process's tracer provider: the SDK's when tracing is on, a no-op one
// otherwise.
type Provider struct {
	trace.TracerProvider
	sdk      *sdktrace.TracerProvider
	endpoint string
}

// Enabled says whether spans are exported.
func (p *Provider) Enabled() bool { return p != nil && p.sdk != nil }

// Endpoint is where spans go ("" when off), for the startup log line.
func (p *Provider) Endpoint() string {
	if p == nil {
		return ""
	}
	return p.endpoint
}

// Shutdown flushes the spans not yet exported and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	return p.sdk.Shutdown(ctx)
}

// Off is the provider of a process that does not trace.
func Off() *Provider { return &Provider{TracerProvider: noop.NewTracerProvider()} }

// Environment variables that turn tracing on or off.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
)

// New builds the provider cfg and the environment (lookup is os.LookupEnv in
// production) ask for; service is the default service.name (OTEL_SERVICE_NAME wins).
// Building never dials: an unreachable collector costs dropped spans and a log line
// from the SDK, never a failed start.
func New(ctx context.Context, cfg config.Tracing, service string, lookup func(string) (string, bool)) (*Provider, error) {
	if err := cfg.Validate("tracing"); err != nil {
		return nil, err
	}
	env := func(k string) string {
		v, _ := lookup(k)
		return strings.TrimSpace(v)
	}
	if strings.EqualFold(env(EnvSDKDisabled), "true") {
		return Off(), nil
	}
	// The endpoint: the config's, else the environment's, read through lookup (not by
	// the exporter itself) so that what turns tracing on is what it exports to. A
	// base URL gets the signal's path, as OTEL_EXPORTER_OTLP_ENDPOINT does.
	endpoint, base := cfg.OTLPEndpoint, true
	if endpoint == "" {
		if endpoint = env(EnvTracesEndpoint); endpoint != "" {
			base = false
		} else if endpoint = env(EnvEndpoint); endpoint == "" {
			return Off(), nil
		}
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("tracing: OTLP endpoint %q: want a URL such as http://127.0.0.1:4318", endpoint)
	}
	protocol := cfg.Protocol
	if protocol == "" {
		protocol = env(EnvTracesProtocol)
	}
	if protocol == "" {
		protocol = env(EnvProtocol)
	}
	var exp sdktrace.SpanExporter
	switch protocol {
	case "", "http/protobuf":
		if base {
			u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
		}
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u.String()))
	case "grpc":
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(u.String()))
	default:
		return nil, fmt.Errorf("%s %q: want http/protobuf or grpc", EnvProtocol, protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	// Later detectors win: the default name, then OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES.
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Provider{TracerProvider: sdk, sdk: sdk, endpoint: u.String()}, nil
}

// Propagator is the W3C Trace Context propagator, the only format the API carries
// (Task.trace_context, Lease.trace_context).
var Propagator = propagation.TraceContext{}

// ContextWithRemoteParent returns ctx carrying the span context of a W3C traceparent
// (and tracestate) as a remote parent; ctx unchanged when traceparent is not valid.
func ContextWithRemoteParent(ctx context.Context, traceparent, tracestate string) context.Context {
	if traceparent == "" {
		return ctx
	}
	c := propagation.MapCarrier{"traceparent": traceparent}
	if tracestate != "" {
		c["tracestate"] = tracestate
	}
	return Propagator.Extract(ctx, c)
}
