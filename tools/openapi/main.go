// Command openapi adjusts the OpenAPI document protoc-gen-openapiv2 writes
// (gen/openapiv2/agentplane.swagger.json) where the HTTP rules cannot say what the
// server does:
//
//   - POST /v1/specs/validate takes the qar/v1 document itself as its body (JSON or
//     YAML text), not a base64 string, and only format, documentName and
//     tenantMaxDepth as query parameters (not every field of the typed specs);
//   - server streams (WatchTask, AwaitDecision) are application/x-ndjson, one
//     {"result": ...} object a line and a last {"error": Status} line if the stream
//     fails after it started;
//   - GET /v1/admin/backup is the backup file (application/octet-stream), not a
//     stream of base64 chunks (server/http.go serves it so).
//
// It rewrites the file in place and is idempotent; .ci/run runs it after buf generate
// and fails when the committed document differs:
//
//	go tool -modfile=tools/buf/go.mod buf generate && go run ./tools/openapi gen/openapiv2/agentplane.swagger.json
package main

//go:generate go run . ../../gen/openapiv2/agentplane.swagger.json

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

type obj = map[string]any

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: openapi gen/openapiv2/agentplane.swagger.json")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "openapi:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc obj
	if err := json.Unmarshal(raw, &doc); err != nil {
		return err
	}
	if err := patch(doc); err != nil {
		return err
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}

// operation returns paths[path][method], or an error naming what is missing.
func operation(doc obj, path, method string) (obj, error) {
	paths, _ := doc["paths"].(obj)
	item, _ := paths[path].(obj)
	op, _ := item[method].(obj)
	if op == nil {
		return nil, fmt.Errorf("no %s %s in the document", strings.ToUpper(method), path)
	}
	return op, nil
}

const streamDescription = "A stream of newline-delimited JSON (application/x-ndjson): one " +
	"`{\"result\": ...}` object a line. If the stream fails after its first line, a last line " +
	"`{\"error\": google.rpc.Status}` (with its ErrorInfo) ends it: the HTTP status, 200, was sent " +
	"with the first line. An error before the first line is an ordinary error response. See docs/api.md."

func patch(doc obj) error {
	validate, err := operation(doc, "/v1/specs/validate", "post")
	if err != nil {
		return err
	}
	keep := []any{obj{
		"name":        "document",
		"in":          "body",
		"required":    true,
		"description": "The qar/v1 document itself, JSON or YAML text, as the request body (not base64, not wrapped in an object).",
		"schema":      obj{"type": "string"},
	}}
	params, _ := validate["parameters"].([]any)
	for _, p := range params {
		if name, _ := p.(obj)["name"].(string); slices.Contains([]string{"format", "documentName", "tenantMaxDepth"}, name) {
			keep = append(keep, p)
		}
	}
	if len(keep) != 4 {
		return fmt.Errorf("POST /v1/specs/validate: expected the format, documentName and tenantMaxDepth query parameters, kept %d parameters", len(keep))
	}
	validate["parameters"] = keep
	validate["consumes"] = []any{"application/json", "application/yaml", "application/x-yaml", "text/yaml"}

	for _, s := range []struct{ path, method string }{
		{"/v1/tasks/{taskId}:watch", "get"},
		{"/v1/runtime/tasks/{lease.taskId}:awaitDecision", "post"},
	} {
		op, err := operation(doc, s.path, s.method)
		if err != nil {
			return err
		}
		op["produces"] = []any{"application/x-ndjson"}
		ok, _ := op["responses"].(obj)["200"].(obj)
		if ok == nil {
			return fmt.Errorf("%s %s has no 200 response", s.method, s.path)
		}
		ok["description"] = streamDescription
	}

	backup, err := operation(doc, "/v1/admin/backup", "get")
	if err != nil {
		return err
	}
	backup["produces"] = []any{"application/octet-stream"}
	backup["responses"].(obj)["200"] = obj{
		"description": "The backup: a consistent bbolt file of the store (Content-Length is its size). " +
			"Restore it as agentplane.db in an empty data directory (docs/operations.md). A failure after " +
			"the first byte aborts the response, so a short file is never a complete one.",
		"schema": obj{"type": "file"},
	}
	return nil
}
