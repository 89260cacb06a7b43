package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/cmd/ctl/internal/printer"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

func addAdminCommands(cmd *cobra.Command, g *globals) {
	cmd.AddCommand(newAdminBackupCommand(g), newAdminStatsCommand(g), newAdminPurgeCommand(g), newAdminWebhooksCommand(g))
}

func newAdminBackupCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "backup FILE",
		Short: "Write a consistent copy of the store to FILE while the server runs",
		Long: "Stream a hot backup of the store into FILE. The copy is written to FILE.tmp, synced to disk and\n" +
			"renamed, so FILE is either the previous file or a complete backup, never half of one. To restore,\n" +
			"put the file where the server's store lives (under --data-dir) and start the server on it.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			// A backup of a large store outlives one call's --timeout, so it runs as a stream.
			return g.stream(cmd, func(ctx context.Context, c *client.Client) error {
				stream, err := c.Admin.Backup(ctx, &agentplanev1.BackupRequest{})
				if err != nil {
					return err
				}
				n, err := writeAtomically(path, func(w io.Writer) (int64, error) { return copyBackup(stream, w) })
				if err != nil {
					return err
				}
				summary, _ := structpb.NewStruct(map[string]any{"file": path, "bytes": n})
				return g.printer(cmd).Message(summary, func(t *printer.Tab) {
					t.Row(fmt.Sprintf("wrote %d bytes to %s", n, path))
				})
			})
		},
	}
}

// copyBackup copies the backup stream to w and checks it against the size the server
// announced, so that a stream cut short is an error, not a truncated backup.
func copyBackup(stream interface {
	Recv() (*agentplanev1.BackupResponse, error)
}, w io.Writer) (int64, error) {
	var n, total int64 = 0, -1
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return n, err
		}
		if t := resp.GetTotalBytes(); t > 0 && total < 0 {
			total = t
		}
		m, err := w.Write(resp.GetChunk())
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	if total >= 0 && n != total {
		return n, fmt.Errorf("backup stream ended after %d of %d bytes", n, total)
	}
	if n == 0 {
		return 0, errors.New("the server sent an empty backup")
	}
	return n, nil
}

// writeAtomically writes path through path.tmp: write, fsync, rename, fsync the
// directory. On any error the temporary file is removed and path is untouched.
func writeAtomically(path string, write func(io.Writer) (int64, error)) (n int64, err error) {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if n, err = write(f); err != nil {
		return n, err
	}
	if err = f.Sync(); err != nil {
		return n, err
	}
	if err = f.Close(); err != nil {
		return n, err
	}
	if err = os.Rename(tmp, path); err != nil {
		return n, err
	}
	// The rename is durable only once the directory entry is.
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return n, err
	}
	defer dir.Close()
	return n, dir.Sync()
}

func newAdminStatsCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "stats",
		Short: "Show server and store statistics",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Admin.GetStats(ctx, &agentplanev1.GetStatsRequest{})
				if err != nil {
					return err
				}
				return g.printer(cmd).Message(resp, func(t *printer.Tab) {
					t.Row("STAT", "VALUE")
					t.Row("server version", resp.GetServerVersion())
					t.Row("started", when(resp.GetStartTime()))
					t.Row("uptime", resp.GetUptime().AsDuration().Round(time.Second))
					t.Row("store", fmt.Sprintf("%s %s (schema %d)", resp.GetStore(), resp.GetStorePath(), resp.GetSchemaVersion()))
					storeRows(t, resp)
					batch := 0.0
					if resp.GetCommits() > 0 {
						batch = float64(resp.GetUpdates()) / float64(resp.GetCommits())
					}
					t.Row("commits", fmt.Sprintf("%d (%.1f writes each)", resp.GetCommits(), batch))
					states := make([]string, 0, len(resp.GetTasksByState()))
					for s := range resp.GetTasksByState() {
						states = append(states, s)
					}
					sort.Strings(states)
					for _, s := range states {
						t.Row("tasks "+enumName(stringer(s), "TASK_STATE_"), resp.GetTasksByState()[s])
					}
					t.Row("events", resp.GetEvents())
					t.Row("pending interrupts", resp.GetPendingInterrupts())
					t.Row("active leases", resp.GetActiveLeases())
					queues := slices.Sorted(maps.Keys(resp.GetQueueDepth()))
					if len(queues) == 0 {
						t.Row("queued", 0)
					}
					for _, q := range queues {
						t.Row("queued in "+q, resp.GetQueueDepth()[q])
					}
					for _, b := range resp.GetBudgets() {
						t.Row("budget "+b.GetBudget()+" of "+b.GetTenant(), budgetLine(b)+", resets "+b.GetResetsAt().AsTime().UTC().Format(time.RFC3339))
					}
				})
			})
		},
	}
}

// budgetLine is one budget's count for its period: what is used of each limit, and
// whether it warned or is spent.
func budgetLine(b *agentplanev1.BudgetStatus) string {
	var parts []string
	if b.GetLimitTokens() > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d tokens", b.GetUsedTokens(), b.GetLimitTokens()))
	} else {
		parts = append(parts, fmt.Sprintf("%d tokens", b.GetUsedTokens()))
	}
	if b.GetLimitCostMicros() > 0 {
		parts = append(parts, fmt.Sprintf("%s of %s USD", usd(b.GetUsedCostMicros()), usd(b.GetLimitCostMicros())))
	}
	line := strings.Join(parts, ", ") + " this " + b.GetPeriod()
	switch {
	case b.GetExceeded() && b.GetOnLimit() == "approve":
		line += ", SPENT: model calls need approval (ctl hitl list)"
	case b.GetExceeded():
		line += ", SPENT: new tasks refused"
	case b.GetWarned():
		line += fmt.Sprintf(", over %d%%", b.GetWarnPercent())
	}
	return line
}

// usd formats millionths of a dollar ("2.50").
func usd(micros int64) string {
	return fmt.Sprintf("%d.%06d", micros/1_000_000, micros%1_000_000)
}

// storeRows are the store's own figures: the size of its data (a bbolt file, a
// PostgreSQL database) and, for a store that keeps a write-ahead log, the log.
func storeRows(t *printer.Tab, resp *agentplanev1.GetStatsResponse) {
	switch resp.GetStore() {
	case "bbolt":
		t.Row("store file size", humanBytes(resp.GetStoreBytes()))
	case "postgres":
		t.Row("database size", humanBytes(resp.GetStoreBytes()))
	default:
		t.Row("store size", humanBytes(resp.GetStoreBytes()))
	}
	if resp.GetWriteAheadLog() {
		t.Row("log since checkpoint", fmt.Sprintf("%s (%d checkpoints since start)", humanBytes(resp.GetLogBytes()), resp.GetCheckpoints()))
	}
}

// stringer lets a plain string go through enumName.
type stringer string

func (s stringer) String() string { return string(s) }

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB (%d bytes)", float64(n)/float64(div), "KMGTPE"[exp], n)
}

type adminPurgeOptions struct {
	olderThan time.Duration
	dryRun    bool
}

func newAdminPurgeCommand(g *globals) *cobra.Command {
	o := &adminPurgeOptions{}
	cmd := &cobra.Command{
		Use:     "purge",
		Short:   "Delete ended tasks older than a cutoff, with their events, interrupts and verdicts",
		Example: "  ctl admin purge --older-than 720h --dry-run\n  ctl admin purge            # the server's tasks.retention; without one, a usage error asking for --older-than",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := &agentplanev1.PurgeTasksRequest{DryRun: o.dryRun}
			if cmd.Flags().Changed("older-than") {
				if o.olderThan < 0 {
					return usageErr("--older-than must not be negative")
				}
				req.OlderThan = durationpb.New(o.olderThan)
			}
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Admin.PurgeTasks(ctx, req)
				if err != nil {
					return err
				}
				return g.printer(cmd).Message(resp, func(t *printer.Tab) {
					verb := "purged"
					if o.dryRun {
						verb = "would purge"
					}
					t.Row(fmt.Sprintf("%s %d tasks and %d events", verb, resp.GetTasks(), resp.GetEvents()))
				})
			})
		},
	}
	cmd.Flags().DurationVar(&o.olderThan, "older-than", 0, "purge tasks that ended longer ago than this (default: the server's tasks.retention; required when it has none)")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "count what would be purged without deleting")
	return cmd
}
