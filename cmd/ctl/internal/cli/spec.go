package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/cmd/ctl/internal/printer"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/spec"
)

func addSpecCommands(cmd *cobra.Command, g *globals) {
	cmd.AddCommand(newSpecValidateCommand(g), newSpecRulesCommand(g), newSpecExplainCommand(g), newSpecSchemaCommand(g))
}

type specValidateOptions struct {
	tenantMaxDepth int32
	quiet          bool
	offline        bool
	config         string
	tenant         string
}

// defaultTenant is the tenant of single-user mode (auth.DefaultTenant, which ctl does
// not link): the tenant whose settings --offline applies unless --tenant names another.
const defaultTenant = "default"

func newSpecValidateCommand(g *globals) *cobra.Command {
	o := &specValidateOptions{}
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Validate qar/v1 spec documents (YAML or JSON; - reads stdin)",
		Long: "Validates each document with the server's rules, exactly as StartTask would, and prints every\n" +
			"violation as FILE:LINE:COL: RULE_ID PATH: MESSAGE. Exit 0 when all are valid, 1 when one is\n" +
			"invalid, 2 when a file cannot be read. With -o json|yaml it prints the API result per file.\n\n" +
			"With --offline no control plane is needed: ctl runs the server's own validator with the\n" +
			"deployment knowledge (static agents, nesting caps, document limits) of the configuration file\n" +
			"given by --config (or AGENTPLANE_CONFIG; the server's defaults without one), so a CI job gets\n" +
			"the answer a control plane booted on that file would give.",
		Example: "  ctl spec validate examples/graphs/*.yaml\n" +
			"  ctl spec validate --offline --config examples/with-static-agents/controlplane.yaml examples/with-static-agents/*/*.yaml",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !o.offline && (cmd.Flags().Changed("config") || cmd.Flags().Changed("tenant")) {
				return usageErr("--config and --tenant go with --offline (online, the server's own configuration applies)")
			}
			docs := make([][]byte, len(args))
			for i, path := range args {
				b, err := readSpecFile(path, g.stdin)
				if err != nil {
					return usageErr("%v", err)
				}
				docs[i] = b
			}
			invalid := 0
			run := func(validate func(*agentplanev1.ValidateSpecRequest) (*agentplanev1.ValidateSpecResponse, error)) error {
				for i, path := range args {
					resp, err := validate(&agentplanev1.ValidateSpecRequest{
						Source: &agentplanev1.ValidateSpecRequest_Document{Document: docs[i]},
						Format: documentFormat(path), DocumentName: path, TenantMaxDepth: o.tenantMaxDepth,
					})
					if v := specViolationsOf(err); v != nil {
						// Over the deployment's limits: refused, with its finding.
						resp, err = &agentplanev1.ValidateSpecResponse{Valid: proto.Bool(false), Errors: v}, nil
					}
					if err != nil {
						return fmt.Errorf("%s: %w", path, err)
					}
					if !resp.GetValid() {
						invalid++
					}
					if err := printValidation(g.printer(cmd), path, resp, o.quiet); err != nil {
						return err
					}
				}
				return nil
			}
			var err error
			if o.offline {
				var validate func(*agentplanev1.ValidateSpecRequest) (*agentplanev1.ValidateSpecResponse, error)
				if validate, err = o.offlineValidator(); err != nil {
					return err
				}
				err = run(validate)
			} else {
				err = g.call(cmd, func(ctx context.Context, c *client.Client) error {
					return run(func(req *agentplanev1.ValidateSpecRequest) (*agentplanev1.ValidateSpecResponse, error) {
						return c.Spec.ValidateSpec(ctx, req)
					})
				})
			}
			if err != nil {
				return err
			}
			if invalid > 0 {
				return &exitError{code: exitFailed, err: fmt.Errorf("%d of %d documents invalid", invalid, len(args))}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Int32Var(&o.tenantMaxDepth, "tenant-max-depth", 0, "validate against a tenant nesting cap too")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "print nothing for valid documents and no warnings")
	f.BoolVar(&o.offline, "offline", false, "validate here, without a control plane, with the rules of --config")
	f.StringVar(&o.config, "config", os.Getenv("AGENTPLANE_CONFIG"), "with --offline: the control plane's config file (env AGENTPLANE_CONFIG; default: the server's defaults)")
	f.StringVar(&o.tenant, "tenant", defaultTenant, "with --offline: the tenant whose settings (tenants.NAME.max_depth) apply")
	return cmd
}

// offlineValidator is ValidateSpec without the server: the server's validator
// (server/spec) built from the configuration the server would load (server/config),
// through the same spec.DeploymentFrom and spec.TenantMaxDepth the server uses.
func (o *specValidateOptions) offlineValidator() (func(*agentplanev1.ValidateSpecRequest) (*agentplanev1.ValidateSpecResponse, error), error) {
	cfg, err := config.Load(o.config)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, usageErr("config %s: %v", o.config, err)
	}
	dep, err := spec.DeploymentFrom(&cfg)
	if err != nil {
		return nil, usageErr("config %s: %v", o.config, err)
	}
	v := spec.NewValidator(dep)
	return func(req *agentplanev1.ValidateSpecRequest) (*agentplanev1.ValidateSpecResponse, error) {
		in := spec.InputFromRequest(req)
		in.TenantMaxDepth = spec.TenantMaxDepth(&cfg, o.tenant, int64(req.GetTenantMaxDepth()))
		res, err := v.Validate(in)
		if err != nil {
			st, _ := apierr.ToStatus(err) // the status the server would send
			return nil, st.Err()
		}
		return res.Response(), nil
	}, nil
}

// readSpecFile reads a spec document; "-" is standard input.
func readSpecFile(path string, stdin io.Reader) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(path)
}

// printValidation prints one document's result: compiler-style lines for people, the
// API message for -o json|yaml.
func printValidation(p *printer.Printer, path string, resp *agentplanev1.ValidateSpecResponse, quiet bool) error {
	if p.Format != printer.Table {
		return p.Message(resp, nil)
	}
	for _, v := range resp.GetErrors() {
		fmt.Fprintln(p.Out, printer.Text(spec.FormatViolation(path, v)))
	}
	if !quiet {
		for _, v := range resp.GetWarnings() {
			fmt.Fprintln(p.Out, "warning: "+printer.Text(spec.FormatViolation(path, v)))
		}
		if resp.GetValid() {
			fmt.Fprintf(p.Out, "%s: valid %s\n", printer.Text(path), printer.Text(resp.GetKind()))
		}
	}
	return nil
}

func newSpecRulesCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rules",
		Short: "List the rule catalogue",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				// The catalogue is longer than a page: read it all.
				resp := &agentplanev1.ListRulesResponse{}
				for token := ""; ; {
					page, err := c.Spec.ListRules(ctx, &agentplanev1.ListRulesRequest{PageSize: 500, PageToken: token})
					if err != nil {
						return err
					}
					resp.Rules = append(resp.Rules, page.GetRules()...)
					if token = page.GetNextPageToken(); token == "" {
						break
					}
				}
				return g.printer(cmd).Message(resp, func(t *printer.Tab) {
					t.Row("RULE", "SEVERITY", "SCOPE", "SUMMARY")
					for _, r := range resp.GetRules() {
						t.Row(r.GetRuleId(), enumName(r.GetSeverity(), "RULE_SEVERITY_"), r.GetScope(), r.GetSummary())
					}
				})
			})
		},
	}
}

func newSpecExplainCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "explain RULE_ID",
		Short: "Explain one rule, with a document that breaks it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Spec.GetRule(ctx, &agentplanev1.GetRuleRequest{RuleId: args[0]})
				if err != nil {
					return err
				}
				r := resp.GetRule()
				if g.output != string(printer.Table) {
					return g.printer(cmd).Message(resp, nil)
				}
				out := cmd.OutOrStdout()
				fmt.Fprintf(out, "%s (%s, %s): %s\n\n%s\n", printer.Text(r.GetRuleId()), enumName(r.GetSeverity(), "RULE_SEVERITY_"),
					printer.Text(r.GetScope()), printer.Text(r.GetSummary()), printer.Block(r.GetDescription()))
				if ex := strings.TrimSpace(r.GetFailingExample()); ex != "" {
					fmt.Fprintf(out, "\nA document that breaks it:\n\n%s\n", printer.Block(indent(ex, "    ")))
				}
				return nil
			})
		},
	}
}

func newSpecSchemaCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of qar/v1 documents (for editor completion)",
		Long: "Prints a JSON Schema (draft 2020-12) of the spec document format. Point your editor's YAML or\n" +
			"JSON language server at it, e.g. with a '# yaml-language-server: $schema=qar-v1.schema.json' line.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Spec.GetSpecSchema(ctx, &agentplanev1.GetSpecSchemaRequest{})
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), strings.TrimSpace(resp.GetJsonSchema()))
				return err
			})
		},
	}
}
