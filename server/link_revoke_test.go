package server_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
)

// TestApprovalLinkRevoke, on each store backend: a link's id is on its page and in
// the webhook; only the tenant's approvers may revoke it; another tenant's id, an
// unknown or altered one is NOT_FOUND; once revoked, the GET and the POST of both
// links of the pair decide nothing, while another link still works; and the
// revocation survives a restart.
func TestApprovalLinkRevoke(t *testing.T) {
	for _, backend := range []string{"bbolt", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			var mutate func(*config.Config)
			if backend == "postgres" {
				dsn := pgtest.DSN(t)
				mutate = func(c *config.Config) {
					c.Store.Backend = config.BackendPostgres
					c.Store.Postgres.DSN = dsn
				}
			}
			r := startChannels(t, mutate)
			ctx := context.Background()
			_, in := r.raise(t, "acme", `{"n":1}`)
			id := in.GetInterruptId()
			l := r.webhookLinks(t, id)
			approve, reject := linkPath(t, l.ApproveURL), linkPath(t, l.RejectURL)
			_, other := r.raise(t, "acme", `{"n":2}`)
			otherLink := linkPath(t, r.webhookLinks(t, other.GetInterruptId()).ApproveURL)
			if l.ID == "" {
				t.Fatalf("webhook link without an id: %+v", l)
			}
			if code, page := r.get(t, approve); code != http.StatusOK || !strings.Contains(page, l.ID) {
				t.Fatalf("GET: %d, want 200 showing the link id %q\n%s", code, l.ID, page)
			}

			revoke := func(tenant string, role auth.Role, linkID string) (*agentplanev1.RevokeApprovalLinkResponse, error) {
				return r.mt.by[tenant][role].c.Hitl.RevokeApprovalLink(ctx, &agentplanev1.RevokeApprovalLinkRequest{LinkId: linkID})
			}
			for _, role := range []auth.Role{auth.RoleUser, auth.RoleRuntime} {
				if _, err := revoke("acme", role, l.ID); status.Code(err) != codes.PermissionDenied {
					t.Fatalf("revoked by acme's %s: %v, want PERMISSION_DENIED", role, err)
				}
			}
			altered := []byte(l.ID)
			altered[len(altered)-1] ^= 1
			for _, tc := range []struct {
				tenant, id string
			}{{"beta", l.ID}, {"acme", "0.00.00"}, {"acme", string(altered)}} {
				if _, err := revoke(tc.tenant, auth.RoleApprover, tc.id); status.Code(err) != codes.NotFound || reasonOf(err) != apierr.ReasonApprovalLinkNotFound {
					t.Fatalf("revoke %q as %s's approver: %v, want NOT_FOUND APPROVAL_LINK_NOT_FOUND", tc.id, tc.tenant, err)
				}
			}
			if _, err := revoke("acme", auth.RoleApprover, ""); status.Code(err) != codes.InvalidArgument {
				t.Fatalf("revoke without an id: %v, want INVALID_ARGUMENT", err)
			}
			if code, _ := r.get(t, approve); code != http.StatusOK {
				t.Fatalf("GET after the refused revocations: %d, want 200", code)
			}

			resp, err := revoke("acme", auth.RoleApprover, l.ID)
			if err != nil || resp.GetLinkId() != l.ID || !resp.GetExpireTime().AsTime().Equal(l.Expires) || resp.GetExpired() {
				t.Fatalf("revoke: %v %v (link expires %v)", resp, err, l.Expires)
			}
			if _, err := revoke("acme", auth.RoleApprover, l.ID); err != nil {
				t.Fatalf("revoke again: %v, want it to succeed", err)
			}
			refused := func(when string) {
				t.Helper()
				for _, p := range []string{approve, reject} {
					if code, page := r.get(t, p); code != http.StatusGone || !strings.Contains(page, "revoked") || strings.Contains(page, "<form") {
						t.Fatalf("GET %s: %d, want 410 revoked\n%s", when, code, page)
					}
					if code, page := r.post(t, p, url.Values{"confirm": {"1"}, "reason": {"no"}}, "Origin", r.base, "Sec-Fetch-Site", "same-origin"); code != http.StatusGone || !strings.Contains(page, "revoked") {
						t.Fatalf("POST %s: %d, want 410 revoked\n%s", when, code, page)
					}
				}
				if code, _ := r.get(t, otherLink); code != http.StatusOK {
					t.Fatalf("another link %s: %d, want 200", when, code)
				}
			}
			refused("after the revocation")
			r.wantPending(t, "acme", id, "the revoked link's POST")

			// A decision through a link names the link in the audit log.
			_, third := r.raise(t, "acme", `{"n":3}`)
			tl := r.webhookLinks(t, third.GetInterruptId())
			if code, page := r.post(t, linkPath(t, tl.ApproveURL), url.Values{"confirm": {"1"}}, "Origin", r.base, "Sec-Fetch-Site", "same-origin"); code != http.StatusOK {
				t.Fatalf("POST of a live link: %d\n%s", code, page)
			}
			audit, err := r.mt.by["acme"][auth.RoleApprover].c.Hitl.ListAuditRecords(ctx, &agentplanev1.ListAuditRecordsRequest{InterruptId: third.GetInterruptId()})
			if err != nil || len(audit.GetRecords()) != 1 || audit.GetRecords()[0].GetLinkId() != tl.ID || audit.GetRecords()[0].GetChannel() != "link" {
				t.Fatalf("audit of a link decision: %v %v, want one record with link_id %q", audit, err, tl.ID)
			}

			r.mt.in.Stop(t)
			again := servertest.StartConfig(t, r.mt.in.Config)
			r.base = "http://" + again.HTTPAddr
			refused("after a restart")
		})
	}
}
