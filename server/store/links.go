package store

import (
	"fmt"

	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
)

// MaxLinkRevocationPrune bounds the expired link revocations one PutLinkRevocation
// drops.
const MaxLinkRevocationPrune = 256

// CheckLinkID refuses a tenant or approval link id that cannot be stored.
func CheckLinkID(tenant, linkID string) error {
	if err := CheckTenant(tenant); err != nil {
		return err
	}
	if !schema.ValidComponent(linkID) {
		return fmt.Errorf("store: approval link id of %d bytes (1 to %d)", len(linkID), schema.MaxComponent)
	}
	return nil
}

// CheckLinkRevocation refuses a link revocation that cannot be stored.
func CheckLinkRevocation(rec *storagev1.LinkRevocationRecord) error {
	if err := CheckLinkID(rec.GetTenant(), rec.GetLinkId()); err != nil {
		return err
	}
	if rec.GetExpireTime() == nil || rec.GetRevokeTime() == nil {
		return fmt.Errorf("store: approval link %q revocation without its expire_time or revoke_time", rec.GetLinkId())
	}
	return nil
}
