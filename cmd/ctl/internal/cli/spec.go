package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/cmd/ctl/internal/printer"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/spec"
)

func addSpecCommands(cmd *cobra.Command, g *globals) {
	cmd.AddCommand(newSpecValidateCommand(g), newSpecRulesCommand(g), newSpecExplainCommand(g), newSpecSchemaCommand(g))
}

type specValidateOptions struct {
	tenantMaxDepth int64
	quiet          bool
}

func newSpecValidateCommand(g *globals) *cobra.Command {
	o := &specValidateOptions{}
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Validate qar/v1 spec documents (YAML or JSON; - reads stdin)",
		Long: "Validates each document with the server's rules, exactly as StartTask would, and prints every\n" +
			"violation as FILE:LINE:COL: RULE_ID PATH: MESSAGE. Exit 0 when all are valid, 1 when one is\n" +
			"invalid, 2 when a file cannot be read. With -o json|yaml it prints the API result per file.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			docs := make([][]byte, len(args))
			for i, path := range args {
				b, err := readSpecFile(path, g.stdin)
				if err != nil {
					return usageErr("%v", err)
				}
				docs[i] = b
			}
			invalid := 0
			err := g.call(cmd, func(ctx context.Context, c *client.Client) error {
				for i, path := range args {
					resp, err := c.Spec.ValidateSpec(ctx, &agentplanev1.ValidateSpecRequest{
						Document: docs[i], Format: documentFormat(path), DocumentName: path, TenantMaxDepth: o.tenantMaxDepth,
					})
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
			})
			if err != nil {
				return err
			}
			if invalid > 0 {
				return &exitError{code: exitFailed, err: fmt.Errorf("%d of %d documents invalid", invalid, len(args))}
			}
			return nil
		},
	}
	cmd.Flags().Int64Var(&o.tenantMaxDepth, "tenant-max-depth", 0, "validate against a tenant nesting cap too")
	cmd.Flags().BoolVarP(&o.quiet, "quiet", "q", false, "print nothing for valid documents and no warnings")
	return cmd
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
				resp, err := c.Spec.ListRules(ctx, &agentplanev1.ListRulesRequest{})
				if err != nil {
					return err
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
