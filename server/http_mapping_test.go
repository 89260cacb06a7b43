package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/servertest"
	"github.com/agentplane/agentplane/server/store/schema"
)

func httpGet(t *testing.T, url string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func startLabelled(t *testing.T, in *servertest.Instance, labels map[string]string) string {
	t.Helper()
	resp, err := in.Client.Tasks.StartTask(context.Background(), &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())},
		Input:  client.UserText("hi"), Labels: labels,
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetTask().GetTaskId()
}

// TestHTTPResponsesDoNotLeakTheTransportContentType: the gRPC transport's own
// content-type (application/grpc) is not forwarded as Grpc-Metadata-Content-Type.
func TestHTTPResponsesDoNotLeakTheTransportContentType(t *testing.T) {
	in := servertest.Start(t, nil)
	id := startLabelled(t, in, nil)
	for _, path := range []string{"/v1/tasks/" + id, "/v1/capabilities"} {
		resp := httpGet(t, "http://"+in.HTTPAddr+path)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Grpc-Metadata-Content-Type") != "" {
			t.Errorf("GET %s: %d, headers %v", path, resp.StatusCode, resp.Header)
		}
	}
}

// TestHTTPWatchIsNDJSON: a watch over HTTP is labelled application/x-ndjson, one
// {"result": ...} object a line, without the transport's content-type.
func TestHTTPWatchIsNDJSON(t *testing.T) {
	in := servertest.Start(t, nil)
	id := startLabelled(t, in, nil)
	if _, err := in.Client.Tasks.CancelTask(context.Background(), &agentplanev1.CancelTaskRequest{TaskId: id, Reason: "done"}); err != nil {
		t.Fatal(err)
	}
	resp := httpGet(t, "http://"+in.HTTPAddr+"/v1/tasks/"+id+":watch")
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "application/x-ndjson" || resp.Header.Get("Grpc-Metadata-Content-Type") != "" {
		t.Fatalf("watch: %d, Content-Type %q, headers %v", resp.StatusCode, ct, resp.Header)
	}
	sc := bufio.NewScanner(resp.Body)
	lines := 0
	for sc.Scan() {
		var line map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil || line["result"] == nil {
			t.Fatalf("line %d is not a {\"result\": ...} object: %s (%v)", lines, sc.Text(), err)
		}
		lines++
	}
	if lines == 0 {
		t.Fatal("the watch of a canceled task sent no event")
	}
}

// TestHTTPBackupIsAFile: GET /v1/admin/backup is the bbolt file itself, not NDJSON of
// base64 chunks: application/octet-stream, Content-Length the whole size, and a file
// bbolt opens with the store's buckets.
func TestHTTPBackupIsAFile(t *testing.T) {
	in := servertest.Start(t, nil)
	startLabelled(t, in, nil)
	resp := httpGet(t, "http://"+in.HTTPAddr+"/v1/admin/backup")
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/octet-stream" ||
		resp.Header.Get("Content-Length") != strconv.Itoa(len(body)) {
		t.Fatalf("backup: %d, headers %v, %d bytes", resp.StatusCode, resp.Header, len(body))
	}
	path := filepath.Join(t.TempDir(), "backup.db")
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatalf("the backup is not a bbolt file: %v", err)
	}
	defer db.Close()
	if err := db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(schema.Meta) == nil {
			t.Error("the backup has no meta bucket")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestHTTPLabelSelector: ListTasks filters on labels with an ordinary repeated query
// parameter, labelSelector=key=value.
func TestHTTPLabelSelector(t *testing.T) {
	in := servertest.Start(t, nil)
	prod := startLabelled(t, in, map[string]string{"env": "prod", "team": "a"})
	startLabelled(t, in, map[string]string{"env": "dev", "team": "a"})
	resp := httpGet(t, "http://"+in.HTTPAddr+"/v1/tasks?labelSelector=env=prod&labelSelector=team=a")
	var out struct {
		Tasks []struct {
			TaskID string `json:"taskId"`
		} `json:"tasks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("list: %d %v", resp.StatusCode, err)
	}
	if len(out.Tasks) != 1 || out.Tasks[0].TaskID != prod {
		t.Fatalf("labelSelector env=prod,team=a listed %+v, want only %s", out.Tasks, prod)
	}
	bad := httpGet(t, "http://"+in.HTTPAddr+"/v1/tasks?labelSelector=env")
	b, _ := io.ReadAll(bad.Body)
	if bad.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"REQUEST_INVALID"`) {
		t.Fatalf("a selector without '=': %d %s", bad.StatusCode, b)
	}
}
