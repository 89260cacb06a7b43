package server_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/api/reasons"
	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
	"github.com/agentplane/agentplane/server/store/storetest"
)

// A control plane whose disk fills up says so: gRPC health and /healthz turn
// NOT_SERVING (503), writes and reads answer UNAVAILABLE with STORE_UNAVAILABLE, and
// once space is freed it serves again, by itself, with every acknowledged task.
func TestDiskFullHealthAndRecovery(t *testing.T) {
	for _, wal := range []bool{true, false} {
		t.Run(map[bool]string{true: "wal", false: "default"}[wal], func(t *testing.T) {
			dir := storetest.SmallDisk(t, 24<<20)
			in := servertest.Start(t, func(c *config.Config) {
				c.DataDir = dir
				c.Store.WAL = wal
			})
			ctx := context.Background()
			start := func() (string, error) {
				resp, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
					Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())}, Input: client.UserText("hello"),
				})
				return resp.GetTask().GetTaskId(), err
			}
			health := func() (healthpb.HealthCheckResponse_ServingStatus, int) {
				t.Helper()
				resp, err := in.Client.Health.Check(ctx, &healthpb.HealthCheckRequest{})
				if err != nil {
					t.Fatalf("health: %v", err)
				}
				h, err := http.Get("http://" + in.HTTPAddr + "/healthz")
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, h.Body)
				h.Body.Close()
				return resp.GetStatus(), h.StatusCode
			}
			unavailable := func(what string, err error) {
				t.Helper()
				if status.Code(err) != codes.Unavailable || reasons.Of(err) != apierr.ReasonStoreUnavailable {
					t.Fatalf("%s: want UNAVAILABLE %s, got %v", what, apierr.ReasonStoreUnavailable, err)
				}
			}

			var acked []string
			for range 5 {
				id, err := start()
				if err != nil {
					t.Fatal(err)
				}
				acked = append(acked, id)
			}

			filler := storetest.FillDisk(t, dir)
			var refused error
			for i := 0; i < 20000 && refused == nil; i++ {
				var id string
				if id, refused = start(); refused == nil {
					acked = append(acked, id)
				}
			}
			unavailable("StartTask on a full disk", refused)
			if st, code := health(); st != healthpb.HealthCheckResponse_NOT_SERVING || code != http.StatusServiceUnavailable {
				t.Fatalf("health on a full disk: %v, /healthz %d; want NOT_SERVING, 503", st, code)
			}
			_, err := in.Client.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: acked[0]})
			unavailable("GetTask on a failed store", err)
			if code, failed := storeFailedMetric(t, in); code != http.StatusOK || failed != "1" {
				t.Fatalf("/metrics on a failed store: %d, agentplane_store_failed %q; want 200 and 1", code, failed)
			}

			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(60 * time.Second)
			for st, code := health(); st != healthpb.HealthCheckResponse_SERVING || code != http.StatusOK; st, code = health() {
				if time.Now().After(deadline) {
					t.Fatalf("60s after space was freed: health %v, /healthz %d", st, code)
				}
				time.Sleep(50 * time.Millisecond)
			}
			for _, id := range acked {
				if _, err := in.Client.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: id}); err != nil {
					t.Fatalf("acknowledged task %s after the recovery: %v", id, err)
				}
			}
			if _, err := start(); err != nil {
				t.Fatalf("StartTask after the recovery: %v", err)
			}
			if code, failed := storeFailedMetric(t, in); code != http.StatusOK || failed != "0" {
				t.Fatalf("/metrics after the recovery: %d, agentplane_store_failed %q; want 200 and 0", code, failed)
			}
			t.Logf("%d tasks acknowledged before the refusal", len(acked))
		})
	}
}

// storeFailedMetric scrapes /metrics and returns its status and the value of
// agentplane_store_failed ("" when absent).
func storeFailedMetric(t *testing.T, in *servertest.Instance) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + in.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "agentplane_store_failed "); ok {
			return resp.StatusCode, v
		}
	}
	return resp.StatusCode, ""
}
