// Package cli is ctl's command tree. Every command is built by a constructor taking
// the shared *globals, binds its flags to an options struct, and prints through the
// printer to cmd.OutOrStdout(), so tests run commands in-process and read their output.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/api/reasons"
	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/cmd/ctl/internal/printer"
	"github.com/agentplane/agentplane/server/apierr"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailed  = 1 // the call failed, or (spec validate) the spec is invalid
	exitUsage   = 2 // bad flags or unreadable input
	defaultAddr = "127.0.0.1:7233"
)

// globals are the persistent flags, shared by every command.
type globals struct {
	addr    string
	token   string
	output  string
	timeout time.Duration
	tlsCA   string
	tlsCert string
	tlsKey  string
	tls     bool
	stdin   io.Reader
}

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErr marks an error as a usage error (exit 2).
func usageErr(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// Main runs ctl with args and returns the exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := NewRootCommand(stdin)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintf(stderr, "ctl: %s\n", describe(ee.err))
		}
		return ee.code
	}
	fmt.Fprintf(stderr, "ctl: %s\n", describe(err))
	if isFlagError(err) || reasons.Info(err).GetMetadata()[apierr.MetaRequiredField] != "" {
		return exitUsage // a flag this deployment needs was not given
	}
	return exitFailed
}

// describe renders an error for people: gRPC errors as "CODE (reason): message",
// escaped for the terminal (a message may echo a caller's text). Where the server's
// message tells an API client what to call, the ErrorInfo metadata lets ctl say it
// with its own commands instead (ctlWording).
func describe(err error) string {
	var u *unreachableError
	if errors.As(err, &u) {
		return printer.Block(u.Error())
	}
	if st, ok := status.FromError(err); ok {
		if info := reasons.Info(err); info != nil {
			msg := st.Message()
			if w, ok := ctlWording(reasons.Parse(info.GetReason()), info.GetMetadata()); ok {
				msg = w
			}
			return printer.Block(fmt.Sprintf("%s (%s): %s", st.Code(), info.GetReason(), msg))
		}
		return printer.Block(fmt.Sprintf("%s: %s", st.Code(), st.Message()))
	}
	return printer.Block(err.Error())
}

// ctlWording rephrases an API error in ctl's commands, from its ErrorInfo reason and
// metadata (never from the message text, which may change).
func ctlWording(reason apierr.Reason, md map[string]string) (string, bool) {
	task, interrupt := md[apierr.MetaTaskID], md[apierr.MetaInterruptID]
	switch {
	case reason == apierr.ReasonRuleNotFound:
		return "no such rule; ctl spec rules lists the catalogue", true
	case reason == apierr.ReasonPageTokenInvalid:
		return "that --page-token was not printed by this listing: give the one the previous page printed, with the same filters", true
	case md[apierr.MetaResolveWith] == apierr.ResolveWithContinueTask:
		return fmt.Sprintf("interrupt %s is task %s pausing at the end of its turn for the user; "+
			"resume the task with: ctl task continue %s --message TEXT", interrupt, task, task), true
	case md[apierr.MetaResolveWith] == apierr.ResolveWithResolveInterrupt:
		return fmt.Sprintf("task %s waits for a reviewer's decision on interrupt %s, not for a message; "+
			"see it with: ctl hitl show %s, then decide with: ctl hitl approve|reject|edit %s", task, interrupt, interrupt, interrupt), true
	case md[apierr.MetaWantState] != "" && md[apierr.MetaState] != "":
		state := enumName(stringer(md[apierr.MetaState]), "TASK_STATE_")
		want := enumName(stringer(md[apierr.MetaWantState]), "TASK_STATE_")
		s := fmt.Sprintf("task %s is %s; this needs it %s", task, state, want)
		if want == "input_required" {
			s += " (paused at the end of its turn: ctl task list --state input_required)"
		}
		return s, true
	case md[apierr.MetaRequiredField] == "older_than":
		return "the control plane has no retention configured (tasks.retention), so a purge needs a cutoff: " +
			"give --older-than DURATION (e.g. ctl admin purge --older-than 720h)", true
	case md[apierr.MetaRequiredField] != "":
		flag := "--" + strings.ReplaceAll(md[apierr.MetaRequiredField], "_", "-")
		return fmt.Sprintf("this control plane needs %s here; give it", flag), true
	}
	return "", false
}

// unreachableError is a call that reached no control plane. context is what ctl
// wrapped the transport error in ("watch T: giving up after N reconnects: "), if anything.
type unreachableError struct {
	addr    string
	context string
	err     error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("%sUnavailable: no control plane at %s (%s); start one (controlplane), or point ctl at yours "+
		"with --addr HOST:PORT or the AGENTPLANE_ADDR environment variable", e.context, e.addr, status.Convert(e.err).Message())
}

func (e *unreachableError) Unwrap() error { return e.err }

// explain turns a transport failure (UNAVAILABLE without an ErrorInfo: the server
// never answered) into an error that says where ctl looked and how to point it
// elsewhere. Anything else is returned as it is.
func (g *globals) explain(err error) error {
	var inner interface{ GRPCStatus() *status.Status }
	if errors.As(err, &inner) && inner.GRPCStatus().Code() == codes.Unavailable && reasons.Info(err) == nil {
		cause := inner.(error)
		return &unreachableError{addr: g.addr, context: strings.TrimSuffix(err.Error(), cause.Error()), err: cause}
	}
	return err
}

func isFlagError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown flag", "unknown shorthand flag", "unknown command", "flag needs an argument", "invalid argument", "accepts ", "requires at least", "required flag", "if any flags in the group", "none of the others can be"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// NewRootCommand builds the whole command tree.
func NewRootCommand(stdin io.Reader) *cobra.Command {
	g := &globals{stdin: stdin}
	root := &cobra.Command{
		Use:           "ctl",
		Short:         "Operate and use an agentplane control plane",
		Long:          "ctl talks to an agentplane control plane over gRPC: validate specs, start and watch tasks,\nresolve approvals, run a scripted runtime, and administer the store.",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := printer.ParseFormat(g.output); err != nil {
				return usageErr("%v", err)
			}
			return nil
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.addr, "addr", envOr("AGENTPLANE_ADDR", defaultAddr), "control plane gRPC address (env AGENTPLANE_ADDR)")
	pf.StringVar(&g.token, "token", os.Getenv("AGENTPLANE_TOKEN"), "bearer token (env AGENTPLANE_TOKEN)")
	pf.StringVarP(&g.output, "output", "o", "table", "output format: table, json or yaml")
	pf.DurationVar(&g.timeout, "timeout", 30*time.Second, "deadline of each call (streams are not bounded by it)")
	pf.BoolVar(&g.tls, "tls", false, "use TLS (implied by --tls-ca/--tls-cert)")
	pf.StringVar(&g.tlsCA, "tls-ca", "", "CA certificate file to trust")
	pf.StringVar(&g.tlsCert, "tls-cert", "", "client certificate file (mTLS)")
	pf.StringVar(&g.tlsKey, "tls-key", "", "client key file (mTLS)")

	root.AddGroup(&cobra.Group{ID: "basic", Title: "Basic commands:"}, &cobra.Group{ID: "areas", Title: "Command groups:"})
	for _, c := range []*cobra.Command{newVersionCommand(g), newHealthCommand(g), newCapabilitiesCommand(g)} {
		c.GroupID = "basic"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newSpecCommand(g), newTaskCommand(g), newScheduleCommand(g), newHitlCommand(g), newRuntimeCommand(g), newAdminCommand(g), newBenchCommand(g)} {
		c.GroupID = "areas"
		root.AddCommand(c)
	}
	return root
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// dial connects to the control plane per the global flags.
func (g *globals) dial(ctx context.Context) (*client.Client, error) {
	return g.dialAddr(ctx, g.addr)
}

// dialAddr is dial to another address than --addr.
func (g *globals) dialAddr(ctx context.Context, addr string) (*client.Client, error) {
	var opts []client.Option
	if g.token != "" {
		opts = append(opts, client.WithToken(g.token))
	}
	if g.tls || g.tlsCA != "" || g.tlsCert != "" {
		opts = append(opts, client.WithTLSFiles(g.tlsCA, g.tlsCert, g.tlsKey))
	}
	return client.Dial(ctx, addr, opts...)
}

// printer returns the printer for cmd.
func (g *globals) printer(cmd *cobra.Command) *printer.Printer {
	return &printer.Printer{Format: printer.Format(g.output), Out: cmd.OutOrStdout()}
}

// call runs fn with a connected client and a per-call deadline.
func (g *globals) call(cmd *cobra.Command, fn func(ctx context.Context, c *client.Client) error) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
	defer cancel()
	c, err := g.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return g.explain(fn(ctx, c))
}

// stream is call without the deadline, for watch-like commands.
func (g *globals) stream(cmd *cobra.Command, fn func(ctx context.Context, c *client.Client) error) error {
	c, err := g.dial(cmd.Context())
	if err != nil {
		return err
	}
	defer c.Close()
	return g.explain(fn(cmd.Context(), c))
}

// group builds a command group that only holds subcommands.
func group(use, short string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
}
