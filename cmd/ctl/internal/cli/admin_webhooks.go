package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/cmd/ctl/internal/printer"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// newAdminWebhooksCommand groups the webhook commands: ctl admin webhooks dead-letters.
func newAdminWebhooksCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "webhooks",
		Short: "Webhook notifications: dead letters (docs/notifications.md)",
		Args:  cobra.NoArgs,
	}
	dl := &cobra.Command{
		Use:   "dead-letters",
		Short: "Notifications given up after their endpoint's max_attempts: list and retry them",
		Args:  cobra.NoArgs,
	}
	dl.AddCommand(newDeadLettersListCommand(g), newDeadLettersRetryCommand(g))
	cmd.AddCommand(dl)
	return cmd
}

type deadLettersListOptions struct {
	tenant    string
	limit     int32
	pageToken string
}

func newDeadLettersListCommand(g *globals) *cobra.Command {
	o := &deadLettersListOptions{}
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List webhook dead letters, oldest first",
		Example: "  ctl admin webhooks dead-letters list\n  ctl admin webhooks dead-letters list --tenant acme -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.limit < 0 {
				return usageErr("--limit must not be negative")
			}
			req := &agentplanev1.ListWebhookDeadLettersRequest{Tenant: o.tenant, PageSize: o.limit, PageToken: o.pageToken}
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Admin.ListWebhookDeadLetters(ctx, req)
				if err != nil {
					return err
				}
				now := time.Now()
				err = g.printer(cmd).Message(resp, func(t *printer.Tab) {
					t.Row("ID", "TENANT", "ENDPOINT", "EVENT", "ATTEMPTS", "AGE", "LAST ERROR")
					for _, d := range resp.GetDeadLetters() {
						t.Row(d.GetId(), d.GetTenant(), d.GetEndpoint(), d.GetEventType(), d.GetAttempts(),
							age(d.GetCreateTime(), now), truncate(d.GetLastError(), 60))
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
	f.StringVar(&o.tenant, "tenant", "", "only this tenant's dead letters")
	f.Int32Var(&o.limit, "limit", 0, "dead letters per page (server default 50, at most 500)")
	f.StringVar(&o.pageToken, "page-token", "", "continue a listing from the token a previous page printed")
	return cmd
}

type deadLettersRetryOptions struct {
	all    bool
	tenant string
}

func newDeadLettersRetryCommand(g *globals) *cobra.Command {
	o := &deadLettersRetryOptions{}
	cmd := &cobra.Command{
		Use:     "retry [ID]",
		Short:   "Put dead letters back in the outbox, due now, with their attempts reset",
		Example: "  ctl admin webhooks dead-letters retry msg_0188c2...\n  ctl admin webhooks dead-letters retry --all --tenant acme",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &agentplanev1.RetryWebhookDeadLetterRequest{All: o.all, Tenant: o.tenant}
			switch {
			case o.all && len(args) > 0:
				return usageErr("give an ID or --all, not both")
			case !o.all && len(args) == 0:
				return usageErr("give the ID of a dead letter (ctl admin webhooks dead-letters list), or --all")
			case !o.all && o.tenant != "":
				return usageErr("--tenant goes with --all")
			case len(args) == 1:
				req.Id = args[0]
			}
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Admin.RetryWebhookDeadLetter(ctx, req)
				if err != nil {
					return err
				}
				return g.printer(cmd).Message(resp, func(t *printer.Tab) {
					t.Row(fmt.Sprintf("retried %d dead letter(s)", resp.GetRetried()))
				})
			})
		},
	}
	cmd.Flags().BoolVar(&o.all, "all", false, "retry every dead letter (of --tenant, if given)")
	cmd.Flags().StringVar(&o.tenant, "tenant", "", "with --all: only this tenant's")
	return cmd
}
