package server_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentplane/agentplane/api/reasons"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/servertest"
	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/boltstore"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/pagetoken"
	"github.com/agentplane/agentplane/server/webhooks"
)

// seedDeadLetters writes dead letters into the store file the server will open: for
// each tenant in order, one notification (ids sort in that order). It returns the ids
// by tenant and in order.
func seedDeadLetters(t *testing.T, path string, wal bool, tenants []string) (all []string, byTenant map[string][]string) {
	t.Helper()
	st, err := boltstore.Open(path, boltstore.Options{WAL: wal})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	byTenant = map[string][]string{}
	err = st.Update(context.Background(), func(w store.Writer) error {
		for i, tenant := range tenants {
			id := fmt.Sprintf("msg_%016x%08d", now.UnixNano(), i)
			rec := &storagev1.OutboxRecord{
				Id: id, Tenant: tenant, Endpoint: "ops", EventType: "task.ended", Payload: []byte(`{}`),
				CreateTime: timestamppb.New(now), State: storagev1.OutboxState_OUTBOX_STATE_DEAD, Attempts: 8,
				LastError: "HTTP 502 Bad Gateway", DeadTime: timestamppb.New(now),
			}
			if err := w.PutOutbox(rec); err != nil {
				return err
			}
			all = append(all, id)
			byTenant[tenant] = append(byTenant[tenant], id)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return all, byTenant
}

// listAll follows next_page_token from the first page to the last and returns every
// id listed and the size of every page.
func listAll(t *testing.T, admin agentplanev1.AdminServiceClient, tenant string, size int32) (ids []string, pages []int) {
	t.Helper()
	req := &agentplanev1.ListWebhookDeadLettersRequest{Tenant: tenant, PageSize: size}
	for range 1000 {
		resp, err := admin.ListWebhookDeadLetters(context.Background(), req)
		if err != nil {
			t.Fatalf("ListWebhookDeadLetters(%v): %v", req, err)
		}
		for _, d := range resp.GetDeadLetters() {
			if tenant != "" && d.GetTenant() != tenant {
				t.Fatalf("tenant %q listed %s of tenant %q", tenant, d.GetId(), d.GetTenant())
			}
			ids = append(ids, d.GetId())
		}
		pages = append(pages, len(resp.GetDeadLetters()))
		if resp.GetNextPageToken() == "" {
			return ids, pages
		}
		req.PageToken = resp.GetNextPageToken()
	}
	t.Fatal("the listing does not end")
	return nil, nil
}

// TestListWebhookDeadLettersPages: ListWebhookDeadLetters pages like every List RPC:
// 0 is pagetoken.DefaultPageSize, a larger size than pagetoken.MaxPageSize is lowered
// to it (not refused), a negative one is REQUEST_INVALID; following next_page_token
// lists every dead letter once, oldest first, and the last page has none; a tenant
// filter examines a bounded number of entries per page (short pages with a token);
// a token that is not one, or one of another tenant's listing, is PAGE_TOKEN_INVALID.
func TestListWebhookDeadLettersPages(t *testing.T) {
	cfg := servertest.Config(t)
	// 560 dead letters: more than MaxPageSize. acme has one in 40, so that a page of 1
	// (which may examine webhooks.ScanBudgetPerItem entries) cannot reach the next one.
	var tenants []string
	for i := range pagetoken.MaxPageSize + 60 {
		tenant := "other"
		if i%40 == 39 {
			tenant = "acme"
		}
		tenants = append(tenants, tenant)
	}
	all, byTenant := seedDeadLetters(t, cfg.StorePath(), cfg.Store.WAL, tenants)
	in := servertest.StartConfig(t, cfg)
	admin := in.Client.Admin
	ctx := context.Background()

	first, err := admin.ListWebhookDeadLetters(ctx, &agentplanev1.ListWebhookDeadLettersRequest{})
	if err != nil || len(first.GetDeadLetters()) != pagetoken.DefaultPageSize || first.GetNextPageToken() == "" {
		t.Fatalf("page_size 0: %d dead letters, token %q, %v; want %d and a token", len(first.GetDeadLetters()), first.GetNextPageToken(), err, pagetoken.DefaultPageSize)
	}
	big, err := admin.ListWebhookDeadLetters(ctx, &agentplanev1.ListWebhookDeadLettersRequest{PageSize: 100000})
	if err != nil || len(big.GetDeadLetters()) != pagetoken.MaxPageSize || big.GetNextPageToken() == "" {
		t.Fatalf("page_size 100000: %d dead letters, %v; want %d (the maximum) and a token", len(big.GetDeadLetters()), err, pagetoken.MaxPageSize)
	}
	if _, err := admin.ListWebhookDeadLetters(ctx, &agentplanev1.ListWebhookDeadLettersRequest{PageSize: -1}); status.Code(err) != codes.InvalidArgument ||
		reasons.Of(err) != apierr.ReasonInvalidArgument {
		t.Fatalf("page_size -1: %v, want INVALID_ARGUMENT REQUEST_INVALID", err)
	}

	for _, size := range []int32{7, 0, pagetoken.MaxPageSize} {
		ids, pages := listAll(t, admin, "", size)
		if !slices.Equal(ids, all) {
			t.Fatalf("page_size %d: listed %d ids, want the %d dead letters once each, oldest first", size, len(ids), len(all))
		}
		for i, n := range pages[:len(pages)-1] {
			if want := cmpSize(size); n != want {
				t.Fatalf("page_size %d: page %d holds %d, want %d", size, i, n, want)
			}
		}
	}

	ids, pages := listAll(t, admin, "acme", 1)
	if !slices.Equal(ids, byTenant["acme"]) {
		t.Fatalf("tenant acme: listed %v, want %v", ids, byTenant["acme"])
	}
	if !slices.Contains(pages, 0) {
		t.Fatalf("tenant acme, page_size 1: pages %v; a page examining at most %d entries should come back empty with a token",
			pages, webhooks.ScanBudgetPerItem)
	}

	acme, err := admin.ListWebhookDeadLetters(ctx, &agentplanev1.ListWebhookDeadLettersRequest{Tenant: "acme", PageSize: 1})
	if err != nil || acme.GetNextPageToken() == "" {
		t.Fatalf("tenant acme: %v, token %q", err, acme.GetNextPageToken())
	}
	for name, req := range map[string]*agentplanev1.ListWebhookDeadLettersRequest{
		"not a token":               {PageToken: "not-a-token"},
		"a token altered":           {PageToken: first.GetNextPageToken()[:len(first.GetNextPageToken())-2] + "AA"},
		"acme's token, all tenants": {PageToken: acme.GetNextPageToken()},
		"acme's token, other":       {Tenant: "other", PageToken: acme.GetNextPageToken()},
		"all tenants' token, acme":  {Tenant: "acme", PageToken: first.GetNextPageToken()},
	} {
		if _, err := admin.ListWebhookDeadLetters(ctx, req); status.Code(err) != codes.InvalidArgument || reasons.Of(err) != apierr.ReasonPageTokenInvalid {
			t.Errorf("%s: %v, want INVALID_ARGUMENT PAGE_TOKEN_INVALID", name, err)
		}
	}
}

// cmpSize is the size of a full page for a request's page_size.
func cmpSize(size int32) int {
	n, _ := pagetoken.PageSize(size)
	return n
}
