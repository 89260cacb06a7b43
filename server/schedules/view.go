package schedules

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// toAPI is the API view of a schedule record, with its next nominal times computed.
func (m *Manager) toAPI(rec *storagev1.ScheduleRecord, view View) *agentplanev1.Schedule {
	out := &agentplanev1.Schedule{
		ScheduleId: rec.GetScheduleId(), Tenant: rec.GetTenant(), Spec: rec.GetSpec(), Policy: rec.GetPolicy(), Task: rec.GetTask(),
		Paused: rec.GetPaused(), PauseReason: rec.GetPauseReason(), CreateTime: rec.GetCreateTime(), UpdateTime: rec.GetUpdateTime(),
		CreatedBy: rec.GetCreatedBy(), Revision: rec.GetRevision(), RecentRuns: rec.GetRecentRuns(), Counts: rec.GetCounts(),
		BufferedNominalTime: rec.GetBufferedNominalTime(), RunAs: runAs(rec),
	}
	if out.Counts == nil {
		out.Counts = &agentplanev1.ScheduleCounts{}
	}
	if view == ViewList && len(out.RecentRuns) > 1 {
		out.RecentRuns = out.RecentRuns[:1]
	}
	n := rec.GetNextNominalTime()
	if rec.GetPaused() || n == nil {
		return out
	}
	spec, err := Compile(rec.GetSpec())
	if err != nil {
		return out
	}
	out.NextFireTime = timestamppb.New(spec.FireTime(rec.GetTenant(), rec.GetScheduleId(), n.AsTime()))
	next, ok := n.AsTime(), true
	for i := 0; ok && i < nextTimesShown; i++ {
		out.NextNominalTimes = append(out.NextNominalTimes, timestamppb.New(next))
		next, ok = spec.Next(next)
	}
	return out
}
