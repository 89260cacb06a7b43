package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
	"github.com/agentplane/agentplane/server/store/storetest"
)

// ScanOutbox reads past its first page (256 rows): every record once, in id order.
//
// Mutants: ScanOutbox stopping after one page, or starting the next page at the
// wrong row.
func TestOutboxScanPagesOn(t *testing.T) {
	s := open(t, pgtest.DSN(t))
	defer s.Close()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const n = 600 // more than two pages
	var want []string
	if err := s.Update(context.Background(), func(w store.Writer) error {
		for i := range n {
			rec := storetest.Outbox("acme", fmt.Sprintf("o%04d", i), at, at)
			if i%7 == 3 { // dead letters are another state's scan
				rec.State = storagev1.OutboxState_OUTBOX_STATE_DEAD
			} else {
				want = append(want, rec.GetId())
			}
			if err := w.PutOutbox(rec); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := s.View(context.Background(), func(r store.Reader) error {
		return r.ScanOutbox(storagev1.OutboxState_OUTBOX_STATE_PENDING, "", func(rec *storagev1.OutboxRecord) (bool, error) {
			got = append(got, rec.GetId())
			return true, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ScanOutbox read %d records, want the %d pending ones in order", len(got), len(want))
	}
	depth := int64(-1)
	if err := s.View(context.Background(), func(r store.Reader) (err error) { depth, err = r.OutboxDepth("acme"); return err }); err != nil || depth != n {
		t.Fatalf("OutboxDepth = %d, %v; want %d", depth, err, n)
	}
}

// OutboxDepth counts a tenant's records: without a tenant it is refused, not zero.
//
// Mutant: OutboxDepth without its tenant check.
func TestOutboxDepthNeedsATenant(t *testing.T) {
	s := open(t, pgtest.DSN(t))
	defer s.Close()
	if err := s.View(context.Background(), func(r store.Reader) error { _, err := r.OutboxDepth(""); return err }); err == nil {
		t.Error("OutboxDepth of no tenant answered")
	}
}

// A read that fails is an error, never "not found" or an empty answer: the outbox's
// callers take not-found as absence and would drop or resend a notification.
//
// Mutants: each error return of the outbox's reads skipped.
func TestOutboxReadErrorsAreNotAbsence(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := open(t, dsn)
	defer s.Close()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if err := s.Update(context.Background(), func(w store.Writer) error { return w.PutOutbox(storetest.Outbox("acme", "o1", at, at)) }); err != nil {
		t.Fatal(err)
	}
	reads := map[string]func(r store.Reader) error{
		"GetOutbox": func(r store.Reader) error {
			rec, err := r.GetOutbox("o1")
			if err == nil || store.IsNotFound(err) {
				return fmt.Errorf("GetOutbox = %v, %v", rec, err)
			}
			return nil
		},
		"ScanOutbox": func(r store.Reader) error {
			n := 0
			err := r.ScanOutbox(storagev1.OutboxState_OUTBOX_STATE_PENDING, "", func(*storagev1.OutboxRecord) (bool, error) { n++; return true, nil })
			if err == nil || n != 0 {
				return fmt.Errorf("ScanOutbox read %d records, %v", n, err)
			}
			return nil
		},
		"OutboxDepth": func(r store.Reader) error {
			n, err := r.OutboxDepth("acme")
			if err == nil || n != 0 {
				return fmt.Errorf("OutboxDepth = %d, %v", n, err)
			}
			return nil
		},
	}
	for name, read := range reads {
		t.Run(name, func(t *testing.T) {
			// The read runs in a transaction whose context ends before it: its
			// query fails.
			ctx, cancel := context.WithCancel(context.Background())
			err := s.View(ctx, func(r store.Reader) error { cancel(); return read(r) })
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
		})
	}
	t.Run("ClaimOutbox", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var recs []*storagev1.OutboxRecord
		var claimErr error
		_ = s.Update(ctx, func(w store.Writer) error {
			cancel()
			recs, claimErr = w.ClaimOutbox(at.Add(time.Hour), 10)
			return claimErr
		})
		if claimErr == nil || len(recs) != 0 {
			t.Fatalf("ClaimOutbox = %d records, %v", len(recs), claimErr)
		}
	})

	// A record the database holds but that does not decode is an error too.
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `UPDATE outbox SET rec = '\xffff'::bytea WHERE id = 'o1'`); err != nil {
		t.Fatal(err)
	}
	for name, read := range map[string]func(r store.Reader) error{
		"GetOutbox": func(r store.Reader) error { _, err := r.GetOutbox("o1"); return err },
		"ScanOutbox": func(r store.Reader) error {
			return r.ScanOutbox(storagev1.OutboxState_OUTBOX_STATE_PENDING, "", func(*storagev1.OutboxRecord) (bool, error) { return true, nil })
		},
	} {
		if err := s.View(context.Background(), read); err == nil || store.IsNotFound(err) {
			t.Errorf("%s of an undecodable record = %v; want the decoding error", name, err)
		}
	}
}

// A record that cannot be encoded (a string field that is not UTF-8) is refused by
// PutOutbox with the encoding error, and nothing is written.
//
// Mutant: PutOutbox's encoding error return skipped (the insert then sent without a
// record, which the database refuses with another error, blamed on the connection).
func TestOutboxRecordThatCannotBeEncodedIsRefused(t *testing.T) {
	s := open(t, pgtest.DSN(t))
	defer s.Close()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rec := storetest.Outbox("acme", "o1", at, at)
	rec.LastError = "not utf-8: \xff"
	var putErr error
	err := s.Update(context.Background(), func(w store.Writer) error { putErr = w.PutOutbox(rec); return putErr })
	if putErr == nil || !strings.Contains(putErr.Error(), "store: encoding") || err != putErr {
		t.Fatalf("PutOutbox = %v (Update %v), want the encoding error", putErr, err)
	}
	if err := s.View(context.Background(), func(r store.Reader) error { _, err := r.GetOutbox("o1"); return err }); !store.IsNotFound(err) {
		t.Fatalf("GetOutbox after the refused put = %v, want not found", err)
	}
}
