package schedules

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

func cronSpec(expr, tz string) *agentplanev1.ScheduleSpec {
	return &agentplanev1.ScheduleSpec{Kind: &agentplanev1.ScheduleSpec_Cron{Cron: &agentplanev1.CronSpec{Expression: expr, TimeZone: tz}}}
}

func mustCompile(t *testing.T, s *agentplanev1.ScheduleSpec) *Spec {
	t.Helper()
	c, err := Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// nexts lists the nominal times after from, n of them, as RFC 3339 in loc.
func nexts(t *testing.T, s *Spec, from time.Time, n int, loc *time.Location) []string {
	t.Helper()
	var out []string
	for range n {
		next, ok := s.Next(from)
		if !ok {
			break
		}
		out = append(out, next.In(loc).Format(time.RFC3339))
		from = next
	}
	return out
}

func equal(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %q, want %q", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: got %q, want %q", what, got, want)
		}
	}
}

// The DST rules of docs/schedules.md, in New York (US rules, 2026: spring forward on
// 8 March at 02:00, fall back on 1 November at 02:00) and Paris.
func TestCronDST(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	paris, _ := time.LoadLocation("Europe/Paris")
	for _, tc := range []struct {
		name string
		expr string
		loc  *time.Location
		from time.Time
		want []string
	}{
		{"a skipped local time fires when the gap ends", "30 2 * * *", ny, time.Date(2026, 3, 7, 12, 0, 0, 0, ny),
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"several skipped times fire once at the gap's end", "*/20 2 * * *", ny, time.Date(2026, 3, 8, 0, 0, 0, 0, ny),
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00"}},
		{"a repeated local time fires once, at its first occurrence", "30 1 * * *", ny, time.Date(2026, 10, 31, 12, 0, 0, 0, ny),
			[]string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"}},
		{"the repeated hour is not run twice", "0,30 * * * *", ny, time.Date(2026, 11, 1, 0, 45, 0, 0, ny),
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T02:00:00-05:00"}},
		{"starting inside the second pass of the repeated hour", "30 1 * * *", ny, time.Date(2026, 11, 1, 6, 10, 0, 0, time.UTC), // 01:10 EST
			[]string{"2026-11-02T01:30:00-05:00"}},
		{"Paris, spring forward at 02:00", "15 2 * * *", paris, time.Date(2026, 3, 28, 12, 0, 0, 0, paris),
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:15:00+02:00"}},
		{"weekdays at nine", "0 9 * * MON-FRI", paris, time.Date(2026, 3, 27, 10, 0, 0, 0, paris), // a Friday
			[]string{"2026-03-30T09:00:00+02:00", "2026-03-31T09:00:00+02:00"}},
		{"descriptor", "@daily", time.UTC, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
			[]string{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustCompile(t, cronSpec(tc.expr, tc.loc.String()))
			equal(t, tc.expr, nexts(t, s, tc.from, len(tc.want), tc.loc), tc.want)
		})
	}
}

func TestIntervalAndOneShot(t *testing.T) {
	s := mustCompile(t, &agentplanev1.ScheduleSpec{Kind: &agentplanev1.ScheduleSpec_Interval{Interval: &agentplanev1.IntervalSpec{
		Every: durationpb.New(time.Hour), Offset: durationpb.New(15 * time.Minute)}}})
	equal(t, "hourly at :15", nexts(t, s, time.Date(2026, 1, 1, 10, 15, 0, 0, time.UTC), 2, time.UTC),
		[]string{"2026-01-01T11:15:00Z", "2026-01-01T12:15:00Z"})
	equal(t, "hourly at :15 from :14", nexts(t, s, time.Date(2026, 1, 1, 10, 14, 0, 0, time.UTC), 1, time.UTC),
		[]string{"2026-01-01T10:15:00Z"})
	at := time.Date(2030, 5, 1, 8, 0, 0, 0, time.UTC)
	o := mustCompile(t, &agentplanev1.ScheduleSpec{Kind: &agentplanev1.ScheduleSpec_At{At: timestamppb.New(at)}})
	equal(t, "one-shot", nexts(t, o, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 3, time.UTC), []string{"2030-05-01T08:00:00Z"})
}

func TestCompileRefuses(t *testing.T) {
	for _, tc := range []struct {
		spec  *agentplanev1.ScheduleSpec
		field string
	}{
		{cronSpec("61 * * * *", ""), "spec.cron.expression"},
		{cronSpec("* * * *", ""), "spec.cron.expression"},
		{cronSpec("TZ=Europe/Paris 0 9 * * *", ""), "spec.cron.expression"},
		{cronSpec("@every 5m", ""), "spec.cron.expression"},
		{cronSpec("0 0 30 2 *", ""), "spec.cron.expression"}, // 30 February
		{cronSpec("0 9 * * *", "Mars/Olympus"), "spec.cron.time_zone"},
		{cronSpec("0 9 * * *", "Local"), "spec.cron.time_zone"},
		{&agentplanev1.ScheduleSpec{Kind: &agentplanev1.ScheduleSpec_Interval{Interval: &agentplanev1.IntervalSpec{Every: durationpb.New(time.Millisecond)}}}, "spec.interval.every"},
		{&agentplanev1.ScheduleSpec{Kind: &agentplanev1.ScheduleSpec_Interval{Interval: &agentplanev1.IntervalSpec{Every: durationpb.New(time.Minute), Offset: durationpb.New(time.Minute)}}}, "spec.interval.offset"},
		{&agentplanev1.ScheduleSpec{Jitter: durationpb.New(25 * time.Hour), Kind: cronSpec("@hourly", "").Kind}, "spec.jitter"},
		{&agentplanev1.ScheduleSpec{}, "spec"},
	} {
		_, err := Compile(tc.spec)
		fe, ok := err.(*FieldError)
		if !ok || fe.Field != tc.field {
			t.Errorf("Compile(%v) = %v, want an error on %s", tc.spec, err, tc.field)
		}
	}
}

// Jitter is a pure function of (tenant, schedule, nominal time), within [0, jitter).
func TestJitterDeterministic(t *testing.T) {
	s := mustCompile(t, &agentplanev1.ScheduleSpec{Jitter: durationpb.New(time.Minute), Kind: cronSpec("@hourly", "").Kind})
	n := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	a := s.FireTime("t", "nightly", n)
	if b := mustCompile(t, &agentplanev1.ScheduleSpec{Jitter: durationpb.New(time.Minute), Kind: cronSpec("@hourly", "").Kind}).FireTime("t", "nightly", n); !a.Equal(b) {
		t.Fatalf("two compilations disagree: %v and %v", a, b)
	}
	distinct := map[time.Duration]bool{}
	for i := range 50 {
		f := s.FireTime("t", "nightly", n.Add(time.Duration(i)*time.Hour))
		d := f.Sub(n.Add(time.Duration(i) * time.Hour))
		if d < 0 || d >= time.Minute {
			t.Fatalf("offset %v outside [0, 1m)", d)
		}
		distinct[d] = true
	}
	if len(distinct) < 40 {
		t.Fatalf("only %d distinct offsets in 50 runs", len(distinct))
	}
}
