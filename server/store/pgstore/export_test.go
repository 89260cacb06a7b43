package pgstore

import "context"

// OpenAt is Open with the schema migrated up to version only: a database as an older
// binary left it.
func OpenAt(ctx context.Context, dsn string, version int, opt Options) (*Store, error) {
	return open(ctx, dsn, opt, version)
}
