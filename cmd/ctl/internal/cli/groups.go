package cli

import "github.com/spf13/cobra"

// The command groups. Each area adds its subcommands in its own file.

func newSpecCommand(g *globals) *cobra.Command {
	cmd := group("spec", "Validate agent and graph specs; browse the rule catalogue")
	addSpecCommands(cmd, g)
	return cmd
}

func newTaskCommand(g *globals) *cobra.Command {
	cmd := group("task", "Start, watch, list, continue and cancel tasks")
	addTaskCommands(cmd, g)
	return cmd
}

func newHitlCommand(g *globals) *cobra.Command {
	cmd := group("hitl", "Review pending approvals: list, show, approve, reject, edit, audit")
	addHitlCommands(cmd, g)
	return cmd
}

func newRuntimeCommand(g *globals) *cobra.Command {
	cmd := group("runtime", "Run a scripted runtime against the control plane")
	addRuntimeCommands(cmd, g)
	return cmd
}

func newAdminCommand(g *globals) *cobra.Command {
	cmd := group("admin", "Operate the control plane: backup, purge, stats")
	addAdminCommands(cmd, g)
	return cmd
}
