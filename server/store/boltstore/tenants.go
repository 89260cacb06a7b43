package boltstore

import (
	"context"
	"fmt"

	"github.com/agentplane/agentplane/server/store"
	"github.com/agentplane/agentplane/server/store/schema"
)

// TaskTenants lists, in key order, every tenant that has a task, for a whole-store walk
// (package storecopy).
func (s *Store) TaskTenants(ctx context.Context, fn func(tenant string) (bool, error)) error {
	return s.tenantsOf(ctx, schema.Tasks, fn)
}

// AuditTenants lists every tenant that has an audit record, in key order.
func (s *Store) AuditTenants(ctx context.Context, fn func(tenant string) (bool, error)) error {
	return s.tenantsOf(ctx, schema.Audit, fn)
}

// tenantsOf lists the tenants of a bucket keyed by TenantPrefix first.
func (s *Store) tenantsOf(ctx context.Context, bucket []byte, fn func(tenant string) (bool, error)) error {
	return s.View(ctx, func(r store.Reader) error {
		c := r.(reader).bucket(bucket).Cursor()
		k, _ := c.First()
		for k != nil {
			tenant, _, ok := schema.SplitTenant(k)
			if !ok {
				return fmt.Errorf("store: malformed %s key %x", bucket, k)
			}
			if more, err := fn(tenant); err != nil || !more {
				return err
			}
			k, _ = seekPast(c, schema.TenantPrefix(tenant))
		}
		return nil
	})
}
