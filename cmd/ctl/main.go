// Command ctl is the agentplane admin and user CLI.
//
//	ctl health
//	ctl capabilities -o json
//	ctl --addr cp.example:7233 --token $AGENTPLANE_TOKEN task list
package main

import (
	"os"

	"github.com/agentplane/agentplane/cmd/ctl/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
