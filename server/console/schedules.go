package console

import (
	"fmt"
	"net/http"
	"strings"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// The schedule pages are read-only: what fires when, and what its runs did. Changes
// go through ctl or the API.

func init() {
	funcs["scheduleSpec"] = scheduleSpecText
	funcs["overlap"] = func(p *agentplanev1.SchedulePolicy) string {
		o := p.GetOverlap()
		if o == agentplanev1.ScheduleOverlapPolicy_SCHEDULE_OVERLAP_POLICY_UNSPECIFIED {
			o = agentplanev1.ScheduleOverlapPolicy_SCHEDULE_OVERLAP_POLICY_SKIP
		}
		return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(o.String(), "SCHEDULE_OVERLAP_POLICY_"), "_", "-"))
	}
	funcs["outcome"] = func(o agentplanev1.ScheduleRunOutcome) string {
		return strings.ToLower(strings.TrimPrefix(o.String(), "SCHEDULE_RUN_OUTCOME_"))
	}
	funcs["catchup"] = func(p *agentplanev1.SchedulePolicy) string {
		if d := p.GetCatchupWindow().AsDuration(); d > 0 {
			return d.String()
		}
		return "10m0s (default)"
	}
}

func scheduleSpecText(s *agentplanev1.ScheduleSpec) string {
	var out string
	switch k := s.GetKind().(type) {
	case *agentplanev1.ScheduleSpec_Cron:
		tz := k.Cron.GetTimeZone()
		if tz == "" {
			tz = "UTC"
		}
		out = fmt.Sprintf("cron %s (%s)", k.Cron.GetExpression(), tz)
	case *agentplanev1.ScheduleSpec_Interval:
		out = "every " + k.Interval.GetEvery().AsDuration().String()
		if o := k.Interval.GetOffset().AsDuration(); o > 0 {
			out += " + " + o.String()
		}
	case *agentplanev1.ScheduleSpec_At:
		out = "once at " + k.At.AsTime().UTC().Format("2006-01-02 15:04:05 UTC")
	default:
		return "-"
	}
	if j := s.GetJitter().AsDuration(); j > 0 {
		out += ", jitter " + j.String()
	}
	return out
}

type schedulesData struct {
	Schedules  []*agentplanev1.Schedule
	Page, Next string
}

func (h *Handler) scheduleList(w http.ResponseWriter, r *http.Request, s *session) {
	d := &schedulesData{Page: r.URL.Query().Get("page")}
	resp, err := h.schedules.ListSchedules(h.call(r, s), &agentplanev1.ListSchedulesRequest{PageSize: 50, PageToken: d.Page})
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	d.Schedules, d.Next = resp.GetSchedules(), resp.GetNextPageToken()
	h.render(w, r, http.StatusOK, "schedules", &page{Title: "Schedules", Nav: "schedules", S: s, Data: d})
}

func (h *Handler) schedule(w http.ResponseWriter, r *http.Request, s *session) {
	resp, err := h.schedules.GetSchedule(h.call(r, s), &agentplanev1.GetScheduleRequest{ScheduleId: r.PathValue("id")})
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	sc := resp.GetSchedule()
	h.render(w, r, http.StatusOK, "schedule", &page{Title: "Schedule " + sc.GetScheduleId(), Nav: "schedules", S: s, Data: sc})
}
