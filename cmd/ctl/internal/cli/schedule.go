package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/cmd/ctl/internal/printer"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

func newScheduleCommand(g *globals) *cobra.Command {
	cmd := group("schedule", "Start tasks on a schedule: cron, interval or one-shot (docs/schedules.md)")
	cmd.AddCommand(
		newScheduleCreateCommand(g),
		newScheduleGetCommand(g),
		newScheduleListCommand(g),
		newScheduleUpdateCommand(g),
		newSchedulePauseCommand(g),
		newScheduleResumeCommand(g),
		newScheduleTriggerCommand(g),
		newScheduleDeleteCommand(g),
	)
	return cmd
}

// scheduleSpecOptions are the flags that say when and how a schedule runs.
type scheduleSpecOptions struct {
	cron, timeZone, at string
	every, offset      time.Duration
	jitter             time.Duration
	overlap            string
	catchup            time.Duration
}

func (o *scheduleSpecOptions) bind(f *pflag.FlagSet) {
	f.StringVar(&o.cron, "cron", "", `cron expression: five fields (minute hour day-of-month month day-of-week) or @hourly, @daily, @weekly, @monthly, @yearly`)
	f.StringVar(&o.timeZone, "time-zone", "", "IANA time zone of --cron, such as Europe/Paris (default UTC)")
	f.DurationVar(&o.every, "every", 0, "fixed interval (at least 1s), on multiples of it since the Unix epoch, plus --offset")
	f.DurationVar(&o.offset, "offset", 0, "with --every: where in the interval it fires (--every 1h --offset 15m: at a quarter past)")
	f.StringVar(&o.at, "at", "", "one time only, RFC 3339 (2026-06-01T09:00:00+02:00)")
	f.DurationVar(&o.jitter, "jitter", 0, "fire up to this long after each nominal time (deterministic per run; at most 24h)")
	f.StringVar(&o.overlap, "overlap", "", "while the previous run goes on: skip (default), buffer-one, allow-all or cancel-previous")
	f.DurationVar(&o.catchup, "catchup-window", 0, "after downtime, run what came due within this long (default 10m); older runs are recorded as missed")
}

// spec is the ScheduleSpec the flags give, or nil when they give none (update).
func (o *scheduleSpecOptions) spec(cmd *cobra.Command) (*agentplanev1.ScheduleSpec, error) {
	changed := func(names ...string) bool {
		for _, n := range names {
			if cmd.Flags().Changed(n) {
				return true
			}
		}
		return false
	}
	s := &agentplanev1.ScheduleSpec{}
	switch n := countSet(o.cron, o.at, durationSet(o.every)); {
	case n > 1:
		return nil, usageErr("--cron, --every and --at are alternatives; give one")
	case n == 0:
		if changed("time-zone", "offset", "jitter") {
			return nil, usageErr("--time-zone, --offset and --jitter go with --cron, --every or --at")
		}
		return nil, nil
	}
	switch {
	case o.cron != "":
		if changed("offset") {
			return nil, usageErr("--offset goes with --every")
		}
		s.Kind = &agentplanev1.ScheduleSpec_Cron{Cron: &agentplanev1.CronSpec{Expression: o.cron, TimeZone: o.timeZone}}
	case o.every != 0:
		if changed("time-zone") {
			return nil, usageErr("--time-zone goes with --cron (an interval counts absolute time)")
		}
		s.Kind = &agentplanev1.ScheduleSpec_Interval{Interval: &agentplanev1.IntervalSpec{Every: durationpb.New(o.every), Offset: durationpb.New(o.offset)}}
	default:
		at, err := time.Parse(time.RFC3339, o.at)
		if err != nil {
			return nil, usageErr("--at %q: want an RFC 3339 time such as 2026-06-01T09:00:00Z", o.at)
		}
		s.Kind = &agentplanev1.ScheduleSpec_At{At: timestamppb.New(at)}
	}
	if o.jitter != 0 {
		s.Jitter = durationpb.New(o.jitter)
	}
	return s, nil
}

func durationSet(d time.Duration) string {
	if d != 0 {
		return "set"
	}
	return ""
}

// policy is the SchedulePolicy the flags give, or nil when they give none.
func (o *scheduleSpecOptions) policy(cmd *cobra.Command) (*agentplanev1.SchedulePolicy, error) {
	if !cmd.Flags().Changed("overlap") && !cmd.Flags().Changed("catchup-window") {
		return nil, nil
	}
	p := &agentplanev1.SchedulePolicy{}
	if o.overlap != "" {
		v, ok := parseEnum(strings.ReplaceAll(o.overlap, "-", "_"), "SCHEDULE_OVERLAP_POLICY_", agentplanev1.ScheduleOverlapPolicy_value)
		if !ok {
			return nil, usageErr("--overlap %q: want skip, buffer-one, allow-all or cancel-previous", o.overlap)
		}
		p.Overlap = agentplanev1.ScheduleOverlapPolicy(v)
	}
	if o.catchup < 0 {
		return nil, usageErr("--catchup-window must not be negative")
	}
	if o.catchup > 0 {
		p.CatchupWindow = durationpb.New(o.catchup)
	}
	return p, nil
}

type scheduleCreateOptions struct {
	when   scheduleSpecOptions
	task   taskStartOptions
	paused bool
}

func newScheduleCreateCommand(g *globals) *cobra.Command {
	o := &scheduleCreateOptions{}
	cmd := &cobra.Command{
		Use:   "create ID (--cron EXPR [--time-zone TZ] | --every DURATION [--offset DURATION] | --at TIME) (--agent FILE | --graph FILE | --agent-id ID)",
		Short: "Create a schedule: each run starts a task as ctl task start would",
		Long: "Create a schedule. The task flags are those of `ctl task start` and are validated the same way, now;\n" +
			"each run starts that task with a request id derived from the schedule and the run's nominal time, so a\n" +
			"run happens exactly once, across crashes and replicas. Repeating the same command is a retry.",
		Example: "  ctl schedule create nightly-report --cron \"30 2 * * *\" --time-zone Europe/Paris --agent report.yaml --input \"yesterday's numbers\"\n" +
			"  ctl schedule create sync --every 15m --offset 5m --jitter 30s --overlap buffer-one --agent-id syncer\n" +
			"  ctl schedule create launch --at 2026-06-01T09:00:00+02:00 --agent-id announcer --input \"we are live\"",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := o.when.spec(cmd)
			if err != nil {
				return err
			}
			if spec == nil {
				return usageErr("say when it runs: --cron EXPR, --every DURATION or --at TIME")
			}
			pol, err := o.when.policy(cmd)
			if err != nil {
				return err
			}
			task, err := o.task.request(g.stdin)
			if err != nil {
				return err
			}
			req := &agentplanev1.CreateScheduleRequest{ScheduleId: args[0], Spec: spec, Policy: pol, Task: task, Paused: o.paused}
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Schedules.CreateSchedule(ctx, req)
				if err != nil {
					return o.task.specViolations(cmd.ErrOrStderr(), err)
				}
				if !resp.GetCreated() && g.output == string(printer.Table) {
					fmt.Fprintf(cmd.ErrOrStderr(), "schedule \"%s\" existed already, as asked: nothing changed\n", printer.Text(args[0]))
				}
				return g.printer(cmd).Message(resp, func(t *printer.Tab) { scheduleTable(t, resp.GetSchedule()) })
			})
		},
	}
	o.when.bind(cmd.Flags())
	o.task.bindTemplate(cmd.Flags())
	cmd.Flags().BoolVar(&o.paused, "paused", false, "create it paused (ctl schedule resume starts it)")
	return cmd
}

func newScheduleGetCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "get ID",
		Short:   "Show a schedule: when it fires next, its counts and recent runs",
		Example: "  ctl schedule get nightly-report\n  ctl schedule get nightly-report -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Schedules.GetSchedule(ctx, &agentplanev1.GetScheduleRequest{ScheduleId: args[0]})
				if err != nil {
					return err
				}
				return g.printer(cmd).Message(resp, func(t *printer.Tab) { scheduleTable(t, resp.GetSchedule()) })
			})
		},
	}
}

type scheduleListOptions struct {
	limit     int32
	pageToken string
}

func newScheduleListCommand(g *globals) *cobra.Command {
	o := &scheduleListOptions{}
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the tenant's schedules, by id",
		Example: "  ctl schedule list\n  ctl schedule list --limit 20 -o yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.limit < 0 {
				return usageErr("--limit must not be negative")
			}
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Schedules.ListSchedules(ctx, &agentplanev1.ListSchedulesRequest{PageSize: o.limit, PageToken: o.pageToken})
				if err != nil {
					return err
				}
				err = g.printer(cmd).Message(resp, func(t *printer.Tab) {
					t.Row("ID", "WHEN", "OVERLAP", "STATE", "NEXT FIRE", "LAST RUN", "STARTED", "SKIPPED", "MISSED", "FAILED")
					for _, s := range resp.GetSchedules() {
						last := "-"
						if runs := s.GetRecentRuns(); len(runs) > 0 {
							last = runText(runs[0])
						}
						n := s.GetCounts()
						t.Row(s.GetScheduleId(), specText(s.GetSpec()), overlapText(s.GetPolicy()), scheduleState(s), when(s.GetNextFireTime()), last,
							n.GetStarted(), n.GetSkipped(), n.GetMissed(), n.GetFailed())
					}
				})
				if err == nil && g.output == string(printer.Table) {
					nextPageHint(cmd, resp.GetNextPageToken())
				}
				return err
			})
		},
	}
	cmd.Flags().Int32Var(&o.limit, "limit", 0, "schedules per page (server default 50, at most 500)")
	cmd.Flags().StringVar(&o.pageToken, "page-token", "", "continue a listing from the token a previous page printed")
	return cmd
}

type scheduleUpdateOptions struct {
	when     scheduleSpecOptions
	task     taskStartOptions
	revision int64
}

func newScheduleUpdateCommand(g *globals) *cobra.Command {
	o := &scheduleUpdateOptions{}
	cmd := &cobra.Command{
		Use:   "update ID [when flags] [policy flags] [task flags]",
		Short: "Change when a schedule runs, its policy or its task (only what the flags give)",
		Long: "Change a schedule. A new --cron, --every or --at counts from now (nothing missed under the old one\n" +
			"is caught up). Task flags replace the whole task template: give --agent, --graph or --agent-id with them.",
		Example: "  ctl schedule update nightly-report --cron \"0 3 * * *\" --time-zone Europe/Paris\n" +
			"  ctl schedule update sync --overlap cancel-previous --catchup-window 1h\n" +
			"  ctl schedule update sync --agent-id syncer-v2 --expected-revision 7",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &agentplanev1.UpdateScheduleRequest{ScheduleId: args[0], ExpectedRevision: o.revision}
			var err error
			if req.Spec, err = o.when.spec(cmd); err != nil {
				return err
			}
			if req.Policy, err = o.when.policy(cmd); err != nil {
				return err
			}
			if countSet(o.task.agentFile, o.task.graphFile, o.task.agentID) > 0 {
				if req.Task, err = o.task.request(g.stdin); err != nil {
					return err
				}
			} else if cmd.Flags().Changed("input") || cmd.Flags().Changed("label") || cmd.Flags().Changed("policy") || cmd.Flags().Changed("queue") {
				return usageErr("task flags replace the whole template: give --agent, --graph or --agent-id with them")
			}
			if req.Spec == nil && req.Policy == nil && req.Task == nil {
				return usageErr("nothing to change: give when, policy or task flags (ctl schedule update --help)")
			}
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Schedules.UpdateSchedule(ctx, req)
				if err != nil {
					return o.task.specViolations(cmd.ErrOrStderr(), err)
				}
				return g.printer(cmd).Message(resp, func(t *printer.Tab) { scheduleTable(t, resp.GetSchedule()) })
			})
		},
	}
	o.when.bind(cmd.Flags())
	o.task.bindTemplate(cmd.Flags())
	cmd.Flags().Int64Var(&o.revision, "expected-revision", 0, "apply only if the schedule is still at this revision (ctl schedule get shows it)")
	return cmd
}

func newSchedulePauseCommand(g *globals) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:     "pause ID",
		Short:   "Stop a schedule from firing until it is resumed",
		Example: "  ctl schedule pause nightly-report --reason \"migrating the warehouse\"",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Schedules.PauseSchedule(ctx, &agentplanev1.PauseScheduleRequest{ScheduleId: args[0], Reason: reason})
				if err != nil {
					return err
				}
				return g.printer(cmd).Message(resp, func(t *printer.Tab) { scheduleTable(t, resp.GetSchedule()) })
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (shown with the schedule)")
	return cmd
}

func newScheduleResumeCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "resume ID",
		Short:   "Let a paused schedule fire again, from now on (what passed while paused is not run)",
		Example: "  ctl schedule resume nightly-report",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Schedules.ResumeSchedule(ctx, &agentplanev1.ResumeScheduleRequest{ScheduleId: args[0]})
				if err != nil {
					return err
				}
				return g.printer(cmd).Message(resp, func(t *printer.Tab) { scheduleTable(t, resp.GetSchedule()) })
			})
		},
	}
}

func newScheduleTriggerCommand(g *globals) *cobra.Command {
	var requestID string
	cmd := &cobra.Command{
		Use:   "trigger ID",
		Short: "Run a schedule now (its overlap policy applies; its next fire times do not change)",
		Example: "  ctl schedule trigger nightly-report\n" +
			"  ctl schedule trigger nightly-report --request-id rerun-2026-03-01   # repeating it returns the same task",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Schedules.TriggerSchedule(ctx, &agentplanev1.TriggerScheduleRequest{ScheduleId: args[0], RequestId: requestID})
				if err != nil {
					return err
				}
				return g.printer(cmd).Message(resp, func(t *printer.Tab) {
					t.Row("RUN", runText(resp.GetRun()))
					if task := resp.GetTask(); task != nil {
						t.Row("task", task.GetTaskId())
						t.Row("state", stateName(task.GetState()))
					}
				})
			})
		},
	}
	cmd.Flags().StringVar(&requestID, "request-id", "", "idempotency key: a retry with the same key returns the same run")
	return cmd
}

func newScheduleDeleteCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "delete ID",
		Short:   "Delete a schedule (the tasks it started stay)",
		Example: "  ctl schedule delete nightly-report",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Schedules.DeleteSchedule(ctx, &agentplanev1.DeleteScheduleRequest{ScheduleId: args[0]})
				if err != nil {
					return err
				}
				return g.printer(cmd).Message(resp, func(t *printer.Tab) { t.Row(fmt.Sprintf("deleted schedule %s", args[0])) })
			})
		},
	}
}

// scheduleTable is the table view of one schedule.
func scheduleTable(t *printer.Tab, s *agentplanev1.Schedule) {
	t.Row("SCHEDULE", s.GetScheduleId())
	t.Row("when", specText(s.GetSpec()))
	t.Row("overlap", overlapText(s.GetPolicy()))
	t.Row("catch-up window", catchupText(s.GetPolicy()))
	t.Row("state", scheduleState(s))
	if s.GetPaused() && s.GetPauseReason() != "" {
		t.Row("pause reason", s.GetPauseReason())
	}
	t.Row("next fire", when(s.GetNextFireTime()))
	var next []string
	for _, n := range s.GetNextNominalTimes() {
		next = append(next, when(n))
	}
	t.Row("next nominal times", orNone(next))
	if b := s.GetBufferedNominalTime(); b != nil {
		t.Row("buffered run", when(b))
	}
	n := s.GetCounts()
	t.Row("runs", fmt.Sprintf("%d started, %d skipped, %d missed, %d failed", n.GetStarted(), n.GetSkipped(), n.GetMissed(), n.GetFailed()))
	t.Row("created", when(s.GetCreateTime())+" by "+s.GetCreatedBy())
	t.Row("runs as", s.GetRunAs())
	t.Row("revision", s.GetRevision())
	for i, r := range s.GetRecentRuns() {
		label := ""
		if i == 0 {
			label = "recent runs"
		}
		t.Row(label, runText(r))
	}
}

func scheduleState(s *agentplanev1.Schedule) string {
	switch {
	case s.GetPaused():
		return "paused"
	case s.GetNextFireTime() == nil:
		return "done"
	}
	return "active"
}

func specText(s *agentplanev1.ScheduleSpec) string {
	var out string
	switch k := s.GetKind().(type) {
	case *agentplanev1.ScheduleSpec_Cron:
		tz := k.Cron.GetTimeZone()
		if tz == "" {
			tz = "UTC"
		}
		out = fmt.Sprintf("cron %q %s", k.Cron.GetExpression(), tz)
	case *agentplanev1.ScheduleSpec_Interval:
		out = "every " + k.Interval.GetEvery().AsDuration().String()
		if o := k.Interval.GetOffset().AsDuration(); o > 0 {
			out += " +" + o.String()
		}
	case *agentplanev1.ScheduleSpec_At:
		out = "at " + when(k.At)
	default:
		return "-"
	}
	if j := s.GetJitter().AsDuration(); j > 0 {
		out += " jitter " + j.String()
	}
	return out
}

func overlapText(p *agentplanev1.SchedulePolicy) string {
	o := p.GetOverlap()
	if o == agentplanev1.ScheduleOverlapPolicy_SCHEDULE_OVERLAP_POLICY_UNSPECIFIED {
		o = agentplanev1.ScheduleOverlapPolicy_SCHEDULE_OVERLAP_POLICY_SKIP
	}
	return strings.ReplaceAll(enumName(o, "SCHEDULE_OVERLAP_POLICY_"), "_", "-")
}

func catchupText(p *agentplanev1.SchedulePolicy) string {
	if d := p.GetCatchupWindow().AsDuration(); d > 0 {
		return d.String()
	}
	return "10m0s (default)"
}

// runText is one run on one line: outcome, nominal time, task or why.
func runText(r *agentplanev1.ScheduleRun) string {
	out := enumName(r.GetOutcome(), "SCHEDULE_RUN_OUTCOME_") + " " + when(r.GetNominalTime())
	if r.GetManual() {
		out += " (trigger)"
	}
	if id := r.GetTaskId(); id != "" {
		out += " task " + id
	}
	if n := r.GetMissedCount(); n > 0 {
		out += fmt.Sprintf(" (%d, to %s)", n, when(r.GetLastMissedTime()))
	}
	if m := r.GetMessage(); m != "" {
		out += ": " + truncate(m, 100)
	}
	return out
}
