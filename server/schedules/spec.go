package schedules

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	// The zone database is built in, so that time zones work on a machine without
	// /usr/share/zoneinfo (a distroless image).
	_ "time/tzdata"

	"github.com/robfig/cron/v3"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// Bounds of a spec.
const (
	MinInterval    = time.Second
	MaxInterval    = 366 * 24 * time.Hour
	MaxJitter      = 24 * time.Hour
	maxExpression  = 256
	maxTimeZone    = 64
	maxCatchup     = 366 * 24 * time.Hour
	defaultCatchup = 10 * time.Minute
)

// Spec is a compiled ScheduleSpec: it says which instants are nominal times.
type Spec struct {
	cron   *cron.SpecSchedule // in UTC, matched against local wall-clock times
	loc    *time.Location
	every  time.Duration
	offset time.Duration
	at     time.Time
	jitter time.Duration
}

// FieldError is a spec or policy that breaks a rule, with the field it is in.
type FieldError struct {
	Field, Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// parser reads standard five-field expressions and the @ descriptors.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Compile checks a spec and compiles it. Errors are *FieldError, the field a path
// under "spec".
func Compile(s *agentplanev1.ScheduleSpec) (*Spec, error) {
	out := &Spec{}
	if j := s.GetJitter(); j != nil {
		if err := j.CheckValid(); err != nil || j.AsDuration() < 0 || j.AsDuration() > MaxJitter {
			return nil, fieldErr("spec.jitter", "must be between 0 and %s", MaxJitter)
		}
		out.jitter = j.AsDuration()
	}
	switch k := s.GetKind().(type) {
	case *agentplanev1.ScheduleSpec_Cron:
		expr := strings.TrimSpace(k.Cron.GetExpression())
		switch {
		case expr == "":
			return nil, fieldErr("spec.cron.expression", "is required")
		case len(expr) > maxExpression:
			return nil, fieldErr("spec.cron.expression", "is longer than %d bytes", maxExpression)
		case strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ="):
			return nil, fieldErr("spec.cron.expression", "names its time zone inline; put it in spec.cron.time_zone")
		case strings.HasPrefix(expr, "@every"):
			return nil, fieldErr("spec.cron.expression", "@every is not a cron expression; use spec.interval")
		}
		sched, err := parser.Parse(expr)
		if err != nil {
			return nil, fieldErr("spec.cron.expression", "%q does not parse: %v (five fields: minute hour day-of-month month day-of-week, or @hourly, @daily, @weekly, @monthly, @yearly)", expr, err)
		}
		spec, ok := sched.(*cron.SpecSchedule)
		if !ok {
			return nil, fieldErr("spec.cron.expression", "%q is not a cron expression", expr)
		}
		tz := k.Cron.GetTimeZone()
		loc := time.UTC
		if tz != "" {
			if len(tz) > maxTimeZone || strings.EqualFold(tz, "local") {
				return nil, fieldErr("spec.cron.time_zone", "%q is not an IANA time zone name (such as Europe/Paris)", tz)
			}
			if loc, err = time.LoadLocation(tz); err != nil {
				return nil, fieldErr("spec.cron.time_zone", "%q is not an IANA time zone name (such as Europe/Paris)", tz)
			}
		}
		spec.Location = time.UTC
		out.cron, out.loc = spec, loc
		if _, ok := out.Next(time.Now()); !ok {
			return nil, fieldErr("spec.cron.expression", "%q never fires in the next five years", expr)
		}
	case *agentplanev1.ScheduleSpec_Interval:
		every, offset := k.Interval.GetEvery(), k.Interval.GetOffset()
		if err := every.CheckValid(); err != nil || every.AsDuration() < MinInterval || every.AsDuration() > MaxInterval {
			return nil, fieldErr("spec.interval.every", "must be between %s and %s", MinInterval, MaxInterval)
		}
		out.every = every.AsDuration()
		if offset != nil {
			if err := offset.CheckValid(); err != nil || offset.AsDuration() < 0 || offset.AsDuration() >= out.every {
				return nil, fieldErr("spec.interval.offset", "must be at least 0 and less than every (%s)", out.every)
			}
			out.offset = offset.AsDuration()
		}
	case *agentplanev1.ScheduleSpec_At:
		if err := k.At.CheckValid(); err != nil || k.At.AsTime().Year() > 9999 || k.At.AsTime().Unix() <= 0 {
			return nil, fieldErr("spec.at", "is not a valid time")
		}
		out.at = k.At.AsTime()
	default:
		return nil, fieldErr("spec", "give exactly one of cron, interval and at")
	}
	return out, nil
}

// Next returns the first nominal time strictly after after, and false when there is
// none (a one-shot in the past; a cron expression that matches nothing in the next
// five years).
func (s *Spec) Next(after time.Time) (time.Time, bool) {
	switch {
	case s.cron != nil:
		return s.nextCron(after)
	case s.every > 0:
		// Nominal times are epoch + offset + k*every.
		since := after.UnixNano() - int64(s.offset)
		k := since / int64(s.every)
		if since < 0 && since%int64(s.every) != 0 {
			k-- // floor
		}
		return time.Unix(0, (k+1)*int64(s.every)+int64(s.offset)).UTC(), true
	default:
		if s.at.After(after) {
			return s.at, true
		}
		return time.Time{}, false
	}
}

// nextCron matches the expression against local wall-clock times (expressed as UTC
// times with the same fields, where there is no DST) and maps each match to an
// instant with resolve: the first match whose instant is after after.
func (s *Spec) nextCron(after time.Time) (time.Time, bool) {
	c := civil(after, s.loc)
	// Bounded: only in a repeated hour can a match resolve to an instant not after
	// after, and an hour holds at most 60 matches.
	for range 1000 {
		c = s.cron.Next(c)
		if c.IsZero() {
			return time.Time{}, false
		}
		if at := resolve(c, s.loc); at.After(after) {
			return at, true
		}
	}
	return time.Time{}, false
}

// civil is t's wall-clock time in loc, as a UTC time with the same fields.
func civil(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), 0, time.UTC)
}

// resolve maps a wall-clock time c (as a UTC time with its fields) in loc to an
// instant. A time that occurs twice (the hour repeated when DST ends) is its first
// occurrence; a time that does not occur (the hour skipped when DST starts) is the
// first instant after the gap, when the later offset begins.
func resolve(c time.Time, loc *time.Location) time.Time {
	u := c.Unix()
	var best time.Time
	seen := map[int]bool{}
	var before int
	// The offsets in force a day either side: a zone changes offset at most once a
	// day, so the instant of c has one of them.
	for i, probe := range []int64{u - 86400, u, u + 86400} {
		_, off := time.Unix(probe, 0).In(loc).Zone()
		if i == 0 {
			before = off
		}
		if seen[off] {
			continue
		}
		seen[off] = true
		at := time.Unix(u-int64(off), 0)
		if _, o := at.In(loc).Zone(); o == off && (best.IsZero() || at.Before(best)) {
			best = at
		}
	}
	if !best.IsZero() {
		return best.UTC()
	}
	// In a gap: read with the offset before it, c lands after the change; the zone in
	// force there began at the change.
	at := time.Unix(u-int64(before), 0).In(loc)
	if start, _ := at.ZoneBounds(); !start.IsZero() && !start.After(at) {
		return start.UTC()
	}
	return at.UTC()
}

// FireTime is when the run of a nominal time fires: nominal plus the schedule's
// jitter offset, a function of (tenant, schedule id, nominal time) only, so that
// every replica and every retry agrees on it.
func (s *Spec) FireTime(tenant, scheduleID string, nominal time.Time) time.Time {
	if s.jitter <= 0 {
		return nominal
	}
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(nominal.UnixNano()))
	h.Write([]byte(tenant))
	h.Write([]byte{0})
	h.Write([]byte(scheduleID))
	h.Write([]byte{0})
	h.Write(n[:])
	sum := h.Sum(nil)
	// Millisecond resolution is plenty for spreading load.
	ms := int64(s.jitter / time.Millisecond)
	if ms <= 0 {
		return nominal
	}
	off := binary.BigEndian.Uint64(sum) % uint64(ms)
	return nominal.Add(time.Duration(off) * time.Millisecond)
}

// catchupWindow is the policy's catch-up window, or the default.
func catchupWindow(p *agentplanev1.SchedulePolicy) time.Duration {
	if d := p.GetCatchupWindow().AsDuration(); d > 0 {
		return d
	}
	return defaultCatchup
}

// CheckPolicy checks a policy; errors are *FieldError.
func CheckPolicy(p *agentplanev1.SchedulePolicy) error {
	if _, ok := agentplanev1.ScheduleOverlapPolicy_name[int32(p.GetOverlap())]; !ok {
		return fieldErr("policy.overlap", "unknown overlap policy %d", p.GetOverlap())
	}
	if w := p.GetCatchupWindow(); w != nil {
		if err := w.CheckValid(); err != nil || w.AsDuration() < 0 || w.AsDuration() > maxCatchup {
			return fieldErr("policy.catchup_window", "must be between 0 (the default, %s) and %s", defaultCatchup, maxCatchup)
		}
	}
	return nil
}

// overlap is the policy's overlap, SKIP by default.
func overlap(p *agentplanev1.SchedulePolicy) agentplanev1.ScheduleOverlapPolicy {
	if o := p.GetOverlap(); o != agentplanev1.ScheduleOverlapPolicy_SCHEDULE_OVERLAP_POLICY_UNSPECIFIED {
		return o
	}
	return agentplanev1.ScheduleOverlapPolicy_SCHEDULE_OVERLAP_POLICY_SKIP
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return fmt.Sprintf("%x", sum[:16])
}
