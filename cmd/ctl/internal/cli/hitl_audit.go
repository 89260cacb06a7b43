package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/cmd/ctl/internal/printer"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

type hitlAuditOptions struct {
	since, interrupt, task string
	limit                  int32
	pageToken              string
	export                 bool
}

func newHitlAuditCommand(g *globals) *cobra.Command {
	o := &hitlAuditOptions{}
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "List the approval audit log: every decision with its principal, channel, time, digest and reason",
		Example: "  ctl hitl audit --since 24h\n  ctl hitl audit --since 2026-05-01T00:00:00Z --interrupt in-abc\n" +
			"  ctl hitl audit --since 720h --export > audit.jsonl",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.limit < 0 {
				return usageErr("--limit must not be negative")
			}
			req := &agentplanev1.ListAuditRecordsRequest{PageSize: o.limit, PageToken: o.pageToken, InterruptId: o.interrupt, TaskId: o.task}
			if o.since != "" {
				t, err := parseSince(o.since, time.Now())
				if err != nil {
					return err
				}
				req.Since = timestamppb.New(t)
			}
			if o.export {
				return g.stream(cmd, func(ctx context.Context, c *client.Client) error { return exportAudit(ctx, cmd, g, c, req) })
			}
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Hitl.ListAuditRecords(ctx, req)
				if err != nil {
					return err
				}
				err = g.printer(cmd).Message(resp, func(t *printer.Tab) {
					t.Row("TIME", "ACTION", "PRINCIPAL", "CHANNEL", "INTERRUPT", "TOOL", "DIGEST", "RULE", "REASON")
					for _, r := range resp.GetRecords() {
						action := enumName(r.GetAction(), "AUDIT_ACTION_")
						if r.GetResolved() {
							action += " (resolved)"
						}
						t.Row(when(r.GetTime()), action, r.GetPrincipal(), r.GetChannel(), r.GetInterruptId(), orDash(r.GetToolName()),
							truncate(r.GetArgsDigest(), 12), orDash(r.GetRule()), truncate(orDash(r.GetReason()), 60))
					}
				})
				if err == nil && g.output == string(printer.Table) {
					nextPageHint(cmd, resp.GetNextPageToken())
				}
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.since, "since", "", "only records from this time: a duration ago (24h) or an RFC 3339 time")
	f.StringVar(&o.interrupt, "interrupt", "", "only this interrupt's records")
	f.StringVar(&o.task, "task", "", "only this task's records")
	f.Int32Var(&o.limit, "limit", 0, "records per page (server default 50, at most 500)")
	f.StringVar(&o.pageToken, "page-token", "", "continue a listing from the token a previous page printed")
	f.BoolVar(&o.export, "export", false, "write every matching record, all pages, as JSON lines (one record per line)")
	return cmd
}

// parseSince reads --since: a duration before now, or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, usageErr("--since %s: a duration ago must not be negative", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s))
	if err != nil {
		return time.Time{}, usageErr("--since %q: want a duration (24h) or an RFC 3339 time (2026-05-01T00:00:00Z)", s)
	}
	return t, nil
}

// exportAudit writes every page of req as JSON lines, each page within --timeout.
func exportAudit(ctx context.Context, cmd *cobra.Command, g *globals, c *client.Client, req *agentplanev1.ListAuditRecordsRequest) error {
	p := &printer.Printer{Format: printer.JSON, Out: cmd.OutOrStdout()}
	for {
		pageCtx, cancel := context.WithTimeout(ctx, g.timeout)
		resp, err := c.Hitl.ListAuditRecords(pageCtx, req)
		cancel()
		if err != nil {
			return err
		}
		for _, r := range resp.GetRecords() {
			if err := p.Line(r); err != nil {
				return err
			}
		}
		if resp.GetNextPageToken() == "" {
			return nil
		}
		req.PageToken = resp.GetNextPageToken()
	}
}
