package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/client/worker"
	"github.com/agentplane/agentplane/client/worker/script"
	"github.com/agentplane/agentplane/cmd/ctl/internal/printer"
)

func addRuntimeCommands(cmd *cobra.Command, g *globals) {
	cmd.AddCommand(newRuntimeRunCommand(g))
}

type runtimeRunOptions struct {
	script    string
	runtimeID string
	capacity  int
	once      bool
	durable   bool
	queues    []string
	drain     time.Duration
}

func newRuntimeRunCommand(g *globals) *cobra.Command {
	o := &runtimeRunOptions{}
	cmd := &cobra.Command{
		Use:   "run --script FILE",
		Short: "Run a scripted runtime: lease tasks and play a fixed list of steps for each",
		Long: "Run a runtime that plays the steps of a script (messages, tool calls through the approval gate,\n" +
			"turn ends, verdicts, complete or fail) for every task it leases. See docs/runtime-script.md.\n" +
			"Ctrl-C or SIGTERM stops leasing and lets running tasks finish for up to --drain-timeout; then, or at a\n" +
			"second Ctrl-C, the tasks still running are handed back (a task waiting for a decision is suspended, to\n" +
			"resume on whichever runtime is up when it is decided) and ctl exits 0.",
		Example: "  ctl runtime run --script examples/runtime/hello.yaml\n" +
			"  ctl runtime run --script examples/runtime/approval.yaml --queue approvals --once",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sc, err := script.Load(o.script)
			if err != nil {
				return usageErr("--script: %v", err)
			}
			if o.capacity < 1 {
				return usageErr("--capacity must be at least 1")
			}
			if o.drain <= 0 {
				return usageErr("--drain-timeout must be positive")
			}
			return g.stream(cmd, func(ctx context.Context, c *client.Client) error {
				runner := &script.Runner{Script: sc, Progress: printer.Lines(cmd.OutOrStdout()), Durable: o.durable}
				opts := worker.Options{
					RuntimeID:    o.runtimeID,
					Queues:       o.queues,
					Capacity:     o.capacity,
					DrainTimeout: o.drain,
					Logger:       slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn})),
				}
				if o.once {
					opts.MaxTasks = 1
				}
				w, err := worker.New(c.Runtime, runner, opts)
				if err != nil {
					return usageErr("%v", err)
				}
				queues := "default"
				if len(o.queues) > 0 {
					queues = strings.Join(o.queues, ", ")
				}
				fmt.Fprintf(cmd.OutOrStdout(), "runtime %s: playing %s (%d steps) for tasks of queue %s from %s, %d at a time\n",
					printer.Text(o.runtimeID), printer.Text(sc.Name), len(sc.Steps), printer.Text(queues), printer.Text(g.addr), o.capacity)
				return grpcCause(w.RunUntilSignal(ctx, func(_ os.Signal, second bool) {
					if second {
						fmt.Fprintln(cmd.ErrOrStderr(), "runtime: handing the running tasks back")
						return
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "runtime: no more leases; finishing running tasks for up to %s, then handing them back (Ctrl-C again to hand them back now)\n", o.drain)
				}))
			})
		},
	}
	host, _ := os.Hostname()
	f := cmd.Flags()
	f.StringVar(&o.script, "script", "", "the script to play (required)")
	f.StringVar(&o.runtimeID, "runtime-id", fmt.Sprintf("ctl-%s-%d", host, os.Getpid()), "this runtime's id, shown on its leases")
	f.IntVar(&o.capacity, "capacity", 1, "tasks played at once")
	f.BoolVar(&o.once, "once", false, "exit after one lease has ended (completed, failed, paused or suspended)")
	f.StringSliceVar(&o.queues, "queue", nil, "run queue to lease from (repeatable or comma-separated); none means the default queue only")
	f.DurationVar(&o.drain, "drain-timeout", worker.DefaultDrainTimeout, "on SIGTERM or Ctrl-C, how long running tasks may finish before they are handed back")
	f.BoolVar(&o.durable, "durable", false, "gated tool calls wait durably (giving the lease up) unless a step says wait: interactive")
	_ = cmd.MarkFlagRequired("script")
	return cmd
}

// grpcCause returns the gRPC status error wrapped in err, so that ctl prints
// "CODE (reason): message" for it rather than the wrapping text; other errors pass
// through.
func grpcCause(err error) error {
	var st interface{ GRPCStatus() *status.Status }
	if errors.As(err, &st) {
		return st.(error)
	}
	return err
}
