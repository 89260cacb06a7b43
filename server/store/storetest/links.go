package storetest

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

func getLinkRevocation(t *testing.T, s store.Store, tenant, id string) *storagev1.LinkRevocationRecord {
	t.Helper()
	var rec *storagev1.LinkRevocationRecord
	view(t, s, func(r store.Reader) (err error) {
		rec, err = r.GetLinkRevocation(tenant, id)
		return err
	})
	return rec
}

func linkRevocation(tenant, id string, expires, revoked int) *storagev1.LinkRevocationRecord {
	return &storagev1.LinkRevocationRecord{Tenant: tenant, LinkId: id, ExpireTime: timestamppb.New(at(expires)),
		RevokeTime: timestamppb.New(at(revoked)), RevokedBy: "alice"}
}

// testLinkRevocations: a revocation round-trips for its tenant only, a bad one is
// refused, and adding one drops the tenant's revocations whose links have expired
// (and no other tenant's, and none still live).
func testLinkRevocations(t *testing.T, s store.Store) {
	if rec := getLinkRevocation(t, s, "acme", "l1"); rec != nil {
		t.Fatalf("absent revocation = %v", rec)
	}
	want := linkRevocation("acme", "l1", 100, 10)
	update(t, s, func(w store.Writer) error {
		if err := w.PutLinkRevocation(want); err != nil {
			return err
		}
		if got, err := w.GetLinkRevocation("acme", "l1"); err != nil || !proto.Equal(got, want) {
			t.Errorf("read in its own transaction = %v, %v", got, err)
		}
		return w.PutLinkRevocation(linkRevocation("beta", "old", 20, 10))
	})
	if got := getLinkRevocation(t, s, "acme", "l1"); !proto.Equal(got, want) {
		t.Fatalf("revocation = %v, want %v", got, want)
	}
	if got := getLinkRevocation(t, s, "beta", "l1"); got != nil {
		t.Fatalf("another tenant's revocation = %v", got)
	}
	for _, bad := range []*storagev1.LinkRevocationRecord{
		linkRevocation("acme", "", 100, 10), {Tenant: "acme", LinkId: "x"}, linkRevocation("", "x", 100, 10),
	} {
		if err := s.Update(context.Background(), func(w store.Writer) error { return w.PutLinkRevocation(bad) }); err == nil {
			t.Errorf("PutLinkRevocation(%v) accepted", bad)
		}
	}
	// Expired by 50: l1 (expires 100) stays; these go when the next one is added at 60.
	update(t, s, func(w store.Writer) error {
		for i := range 5 {
			if err := w.PutLinkRevocation(linkRevocation("acme", fmt.Sprintf("e%d", i), 50, 10)); err != nil {
				return err
			}
		}
		return nil
	})
	update(t, s, func(w store.Writer) error { return w.PutLinkRevocation(linkRevocation("acme", "l2", 200, 60)) })
	for i := range 5 {
		if got := getLinkRevocation(t, s, "acme", fmt.Sprintf("e%d", i)); got != nil {
			t.Errorf("expired revocation e%d kept: %v", i, got)
		}
	}
	for _, k := range [][2]string{{"acme", "l1"}, {"acme", "l2"}, {"beta", "old"}} {
		if got := getLinkRevocation(t, s, k[0], k[1]); got == nil {
			t.Errorf("revocation %s/%s dropped", k[0], k[1])
		}
	}
}
