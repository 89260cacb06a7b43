package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/cmd/ctl/internal/printer"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/version"
)

func newVersionCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print ctl's version and, when reachable, the server's",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "ctl     %s\n", version.String())
			err := g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Capabilities.GetCapabilities(ctx, &agentplanev1.GetCapabilitiesRequest{})
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "server  %s (%s)\n", printer.Text(resp.GetCapabilities().GetServerVersion()), printer.Text(g.addr))
				return nil
			})
			if err != nil {
				fmt.Fprintf(out, "server  unreachable at %s: %s\n", printer.Text(g.addr), describe(err))
			}
			return nil
		},
	}
}

type healthOptions struct {
	service string
}

func newHealthCommand(g *globals) *cobra.Command {
	o := &healthOptions{}
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Check that the control plane serves (gRPC health protocol)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Health.Check(ctx, &healthpb.HealthCheckRequest{Service: o.service})
				if err != nil {
					return err
				}
				if err := g.printer(cmd).Message(resp, func(t *printer.Tab) {
					name := o.service
					if name == "" {
						name = "(server)"
					}
					t.Row("SERVICE", "STATUS")
					t.Row(name, resp.GetStatus())
				}); err != nil {
					return err
				}
				if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
					return &exitError{code: exitFailed, err: fmt.Errorf("%s is %s", g.addr, resp.GetStatus())}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&o.service, "service", "", "check one service, e.g. agentplane.v1.TaskService")
	return cmd
}

func newCapabilitiesCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "capabilities",
		Aliases: []string{"caps"},
		Short:   "Show what this deployment allows the caller",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Capabilities.GetCapabilities(ctx, &agentplanev1.GetCapabilitiesRequest{})
				if err != nil {
					return err
				}
				return g.printer(cmd).Message(resp, func(t *printer.Tab) { capabilitiesTable(t, resp.GetCapabilities()) })
			})
		},
	}
}

func capabilitiesTable(t *printer.Tab, c *agentplanev1.Capabilities) {
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	list := func(s []string) string {
		if len(s) == 0 {
			return "-"
		}
		return strings.Join(s, ", ")
	}
	p := c.GetPrincipal()
	f := c.GetFeatures()
	l := c.GetLimits()
	t.Row("CAPABILITY", "VALUE")
	t.Row("server version", c.GetServerVersion())
	t.Row("store", c.GetStore())
	t.Row("principal", fmt.Sprintf("%s (tenant %s; roles %s)", p.GetSubject(), p.GetTenant(), list(p.GetRoles())))
	t.Row("multi-tenant", yes(c.GetRequirePrincipal()))
	t.Row("mcp injection", yes(c.GetMcpInjection()))
	t.Row("a2a injection", yes(c.GetA2AInjection()))
	t.Row("max caller peers", c.GetMaxCallerPeers())
	t.Row("locked keys", list(c.GetLockedKeys()))
	t.Row("compliance posture", orDash(c.GetCompliancePosture()))
	t.Row("denied capabilities", list(c.GetDeniedCapabilities()))
	sv := c.GetSpec()
	t.Row("spec api versions", list(sv.GetApiVersions()))
	t.Row("spec kinds", list(sv.GetKinds()))
	t.Row("graph roles", list(sv.GetRoles()))
	t.Row("edge kinds", list(sv.GetEdgeKinds()))
	t.Row("hitl modes", list(sv.GetHitlModes()))
	var decisions []string
	for _, d := range c.GetDecisionTypes() {
		decisions = append(decisions, strings.ToLower(strings.TrimPrefix(d.String(), "DECISION_TYPE_")))
	}
	t.Row("decision types", list(decisions))
	t.Row("max depth", l.GetMaxDepth())
	t.Row("max spec bytes", l.GetMaxSpecBytes())
	t.Row("max event bytes", l.GetMaxEventBytes())
	t.Row("max task events", l.GetMaxTaskEvents())
	for _, feat := range []struct {
		name string
		on   bool
	}{
		{"spec validation", f.GetSpecValidation()}, {"tasks", f.GetTasks()}, {"watch resume", f.GetWatchResume()},
		{"idempotent start", f.GetIdempotentStart()}, {"runtime leases", f.GetRuntimeLeases()},
		{"durable interrupts", f.GetDurableInterrupts()}, {"cel policies", f.GetCelPolicies()},
		{"verdicts", f.GetVerdicts()}, {"chat mode", f.GetChatMode()}, {"hot backup", f.GetHotBackup()},
		{"http/json", f.GetHttpJson()},
	} {
		t.Row("feature: "+feat.name, yes(feat.on))
	}
	if mf := f.GetMcpFace(); mf.GetServed() {
		t.Row("mcp face", fmt.Sprintf("%s (versions %s)", mf.GetPath(), list(mf.GetProtocolVersions())))
	} else {
		t.Row("mcp face", "no")
	}
	af := f.GetA2AFace()
	if af.GetServed() {
		t.Row("a2a face", fmt.Sprintf("/a2a/AGENT_ID (versions %s)", list(af.GetProtocolVersions())))
	} else {
		t.Row("a2a face", "no")
	}
	t.Row("a2a push notifications", yes(af.GetPushNotifications()))
	t.Row("a2a default card", orDash(af.GetDefaultCardUrl()))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newBudgetCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "budget",
		Aliases: []string{"budgets"},
		Short:   "Show the token and cost budgets of the caller's tenant, with this period's counts",
		Example: "  ctl budget\n  ctl budget -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Capabilities.GetCapabilities(ctx, &agentplanev1.GetCapabilitiesRequest{})
				if err != nil {
					return err
				}
				view := &agentplanev1.GetCapabilitiesResponse{Budgets: resp.GetBudgets()}
				return g.printer(cmd).Message(view, func(t *printer.Tab) {
					t.Row("BUDGET", "AGENT", "USED", "RESETS")
					for _, b := range resp.GetBudgets() {
						agent := b.GetAgentId()
						if agent == "" {
							agent = "*"
						}
						t.Row(b.GetBudget(), agent, budgetLine(b), b.GetResetsAt().AsTime().UTC().Format(time.RFC3339))
					}
				})
			})
		},
	}
}
