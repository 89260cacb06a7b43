package approvals

import (
	"context"

	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/pagetoken"
)

// maxAuditPageBytes bounds the encoded records of one audit page (a reason may be 16
// KiB): a page ends early, with a token, rather than outgrow a client's receive limit.
const maxAuditPageBytes = 1 << 20

// maxAuditScan bounds the records one page reads to find matches of interrupt_id or
// task_id; a sparse filter gets a short page with a token to continue.
const maxAuditScan = 10_000

// ListAuditRecords is a page of tenant's approval audit log, oldest first, from since
// and of one interrupt or task when the request says so. The page token is bound to
// the tenant and the filters.
func (s *Service) ListAuditRecords(ctx context.Context, tenant string, req *agentplanev1.ListAuditRecordsRequest) (*agentplanev1.ListAuditRecordsResponse, error) {
	size, err := pagetoken.PageSize(req.GetPageSize())
	if err != nil {
		return nil, err
	}
	after := ""
	sinceKey := ""
	if st := req.GetSince(); st != nil {
		if err := st.CheckValid(); err != nil {
			return nil, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "since is not a valid time: %v", err)
		}
		after = store.AuditIDPrefix(st.AsTime())
		sinceKey = after
	}
	scope := pagetoken.Scope("audit", tenant, sinceKey, req.GetInterruptId(), req.GetTaskId())
	cursor, err := s.tokens.Open(scope, req.GetPageToken())
	if err != nil {
		return nil, err
	}
	if cursor != nil {
		after = string(cursor)
	}
	var out []*agentplanev1.AuditRecord
	last, more := "", false
	err = s.store.View(ctx, func(r store.Reader) error {
		bytes, scanned, full := 0, 0, false
		return r.ScanAudit(tenant, after, func(e *storagev1.AuditRecordEntry) (bool, error) {
			if full { // a record beyond the page: there is a next one
				more = true
				return false, nil
			}
			rec := e.GetRecord()
			if (req.GetInterruptId() == "" || rec.GetInterruptId() == req.GetInterruptId()) &&
				(req.GetTaskId() == "" || rec.GetTaskId() == req.GetTaskId()) {
				n := proto.Size(rec)
				if len(out) > 0 && bytes+n > maxAuditPageBytes {
					more = true // this one starts the next page
					return false, nil
				}
				bytes += n
				out = append(out, rec)
			}
			last = rec.GetAuditId()
			scanned++
			full = len(out) == size || scanned == maxAuditScan
			return true, nil
		})
	})
	if err != nil {
		return nil, err
	}
	next := ""
	if more {
		next = last
	}
	return &agentplanev1.ListAuditRecordsResponse{Records: out, NextPageToken: s.tokens.Seal(scope, []byte(next))}, nil
}
