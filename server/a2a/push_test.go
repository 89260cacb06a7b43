package a2a_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
	"github.com/agentplane/agentplane/server/webhooks"
)

type pushed struct {
	header http.Header
	body   []byte
}

// TestA2APushNotifications: a push config set with SendMessage gets every change of
// the task's state through the outbox: with the config's authentication, its token,
// a signature keyed by the token, retried after a failure with the same id; reads
// never show the secrets; a deleted config gets nothing more. On both stores.
func TestA2APushNotifications(t *testing.T) {
	t.Run("bolt", func(t *testing.T) { testPush(t, nil) })
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		testPush(t, func(c *config.Config) { c.Store.Backend, c.Store.Postgres.DSN = config.BackendPostgres, dsn })
	})
}

func testPush(t *testing.T, backend func(*config.Config)) {
	var mu sync.Mutex
	var got []pushed
	failFirst := true
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		got = append(got, pushed{r.Header.Clone(), b})
		if failFirst {
			failFirst = false
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer recv.Close()
	f := startFace(t, nil, func(c *config.Config) {
		c.Notifications.AllowPrivateDestinations = true
		c.Notifications.PollInterval = config.Duration(10 * time.Millisecond)
		c.Notifications.InitialBackoff = config.Duration(10 * time.Millisecond)
		if backend != nil {
			backend(c)
		}
	})
	f.runtime(t, "calc", "", scriptRunner(t, approvalScript))
	first := mustTask(t, f.rpc(t, "calculator", "", "SendMessage", map[string]any{"message": userMessage("p-1", "email"), "metadata": gateSendEmail,
		"configuration": map[string]any{"returnImmediately": true, "taskPushNotificationConfig": map[string]any{
			"url": recv.URL + "/hook", "token": "tok-123", "authentication": map[string]any{"scheme": "Bearer", "credentials": "cred-456"}}}}), true)
	approve(t, f, "", first.ID)
	f.waitTask(t, "calculator", "", first.ID, func(a a2aTask) bool { return a.Status.State == "TASK_STATE_INPUT_REQUIRED" })

	// Until the input-required notification has been delivered.
	var states []string
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		states = states[:0]
		for _, p := range got {
			var sr struct {
				StatusUpdate *struct {
					TaskID string `json:"taskId"`
					Status struct {
						State string `json:"state"`
					} `json:"status"`
				} `json:"statusUpdate"`
			}
			if err := json.Unmarshal(p.body, &sr); err != nil || sr.StatusUpdate == nil || sr.StatusUpdate.TaskID != first.ID {
				t.Fatalf("not a status update of the task: %s", p.body)
			}
			states = append(states, sr.StatusUpdate.Status.State)
		}
		again := false
		for _, p := range got[min(1, len(got)):] {
			again = again || p.header.Get(webhooks.HeaderID) == got[0].header.Get(webhooks.HeaderID)
		}
		mu.Unlock()
		if again && slices.Contains(states, "TASK_STATE_INPUT_REQUIRED") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no input-required notification, or no retry of the failed one; got %v", states)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	// The first notification received was answered 503: it came again, the same.
	failed := got[0]
	retried := false
	for _, p := range got[1:] {
		retried = retried || (p.header.Get(webhooks.HeaderID) == failed.header.Get(webhooks.HeaderID) && string(p.body) == string(failed.body))
	}
	for i, p := range got {
		h := p.header
		if h.Get("Authorization") != "Bearer cred-456" || h.Get(webhooks.HeaderA2AToken) != "tok-123" || h.Get("Content-Type") != "application/a2a+json" {
			t.Errorf("notification %d headers: %v", i, h)
		}
		ts, _ := strconv.ParseInt(h.Get(webhooks.HeaderTimestamp), 10, 64)
		if want := webhooks.Sign([]byte("tok-123"), h.Get(webhooks.HeaderID), ts, p.body); h.Get(webhooks.HeaderSignature) != want {
			t.Errorf("notification %d: signature %q, want %q", i, h.Get(webhooks.HeaderSignature), want)
		}
	}
	mu.Unlock()
	if !retried {
		t.Errorf("notification %s, answered 503, never came again", failed.header.Get(webhooks.HeaderID))
	}
	// The approval wait is working, as everywhere on the face.
	if !strings.Contains(strings.Join(states, " "), "TASK_STATE_WORKING") {
		t.Errorf("states pushed: %v", states)
	}

	list := f.rpc(t, "calculator", "", "ListTaskPushNotificationConfigs", map[string]any{"taskId": first.ID})
	if list.Error != nil || !strings.Contains(string(list.Result), recv.URL) || strings.Contains(string(list.Result), "tok-123") || strings.Contains(string(list.Result), "cred-456") {
		t.Fatalf("list: %s %+v", list.Result, list.Error)
	}
	var l struct {
		Configs []struct {
			ID string `json:"id"`
		} `json:"configs"`
	}
	_ = json.Unmarshal(list.Result, &l)
	if len(l.Configs) != 1 {
		t.Fatalf("configs: %s", list.Result)
	}
	if r := f.rpc(t, "calculator", "", "GetTaskPushNotificationConfig", map[string]any{"taskId": first.ID, "id": l.Configs[0].ID}); r.Error != nil || strings.Contains(string(r.Result), "tok-123") {
		t.Fatalf("get: %s %+v", r.Result, r.Error)
	}
	if r := f.rpc(t, "calculator", "", "DeleteTaskPushNotificationConfig", map[string]any{"taskId": first.ID, "id": l.Configs[0].ID}); r.Error != nil {
		t.Fatalf("delete: %+v", r.Error)
	}
	if r := f.rpc(t, "calculator", "", "GetTaskPushNotificationConfig", map[string]any{"taskId": first.ID, "id": l.Configs[0].ID}); r.code() != -32001 {
		t.Fatalf("get after delete: %+v", r.Error)
	}
	mu.Lock()
	before := len(got)
	mu.Unlock()
	done := mustTask(t, f.rpc(t, "calculator", "", "SendMessage", map[string]any{"message": map[string]any{"messageId": "p-2", "role": "ROLE_USER",
		"taskId": first.ID, "parts": []any{map[string]any{"text": "thanks"}}}}), true)
	if done.Status.State != "TASK_STATE_COMPLETED" {
		t.Fatalf("continued: %s", done.Status.State)
	}
	// A sentinel: a notification enqueued after the task ended, for another task.
	// Once it has arrived, anything enqueued for the deleted config before it would
	// have too (the outbox is sent in order).
	mustTask(t, f.rpc(t, "calculator", "", "SendMessage", map[string]any{"message": userMessage("p-3", "email"), "metadata": gateSendEmail,
		"configuration": map[string]any{"returnImmediately": true, "taskPushNotificationConfig": map[string]any{"url": recv.URL + "/sentinel"}}}), true)
	deadline = time.Now().Add(20 * time.Second)
	for sentinel := false; !sentinel; {
		mu.Lock()
		for _, p := range got[before:] {
			sentinel = sentinel || !strings.Contains(string(p.body), first.ID)
		}
		mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("the sentinel notification never arrived")
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range got[before:] {
		if strings.Contains(string(p.body), first.ID) {
			t.Errorf("a notification after the config was deleted: %s", p.body)
		}
	}
}

// TestA2APushConfigSurvivesRestart: a push config is kept with its task: after the
// control plane restarts on the same store, the task's next change is still pushed.
func TestA2APushConfigSurvivesRestart(t *testing.T) {
	hits := make(chan string, 16)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hits <- string(b)
	}))
	defer recv.Close()
	fast := func(c *config.Config) {
		c.Notifications.AllowPrivateDestinations = true
		c.Notifications.PollInterval = config.Duration(10 * time.Millisecond)
	}
	f := startFace(t, nil, fast)
	tk := mustTask(t, f.rpc(t, "helpdesk", "", "SendMessage", map[string]any{"message": userMessage("rs-1", "hi"),
		"configuration": map[string]any{"returnImmediately": true}}), true)
	if r := f.rpc(t, "helpdesk", "", "CreateTaskPushNotificationConfig", map[string]any{"taskId": tk.ID, "url": recv.URL, "token": "t0k"}); r.Error != nil {
		t.Fatalf("create: %+v", r.Error)
	}
	cfg := f.in.Config
	f.in.Stop(t)

	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	again := servertest.StartConfig(t, cfg)
	f2 := &face{in: again, base: "http://" + again.HTTPAddr, tokens: f.tokens}
	f2.runtime(t, "helpdesk", "", scriptRunner(t, helloScript))
	deadline := time.After(20 * time.Second)
	for {
		select {
		case body := <-hits:
			if strings.Contains(body, tk.ID) && strings.Contains(body, "TASK_STATE_COMPLETED") {
				return
			}
		case <-deadline:
			t.Fatal("no notification of the task's end after the restart")
		}
	}
}
