// Package server is the agentplane control plane: it assembles the store, the domain
// packages and the gates behind the agentplane.v1 gRPC services, serves the same API
// as HTTP/JSON through grpc-gateway, and exposes health, reflection and Prometheus
// metrics.
//
// The service layer reads the same way in every RPC: check the request, authorize,
// call the domain, map the error. Errors are mapped in exactly one place (the
// interceptors in interceptors.go) with apierr.ToStatus; anything unrecognised is
// INTERNAL with a generic message and logged.
//
// New builds a server from a config.Config; Serve runs it until its context ends and
// then shuts down gracefully: new calls are refused, in-flight calls and streams are
// drained (bounded by ShutdownTimeout), and the store is closed cleanly. Tests start
// the very same server in-process on loopback ports.
package server
