package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/agentplane/agentplane/server/store/boltstore"
	"github.com/agentplane/agentplane/server/store/pgstore"
	"github.com/agentplane/agentplane/server/store/storecopy"
)

// storeCopy is `controlplane store copy --from bolt:FILE --to postgres:DSN`: it copies
// every record, then compares both stores record by record.
func storeCopy(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("controlplane store copy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "source store: bolt:FILE or postgres:DSN")
	to := fs.String("to", "", "destination store, empty: bolt:FILE or postgres:DSN")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: controlplane store copy --from bolt:FILE --to postgres:DSN\n\n"+
			"Copies every task, with its spec, events, interrupts, verdicts and obligations, into an\n"+
			"empty store, then compares the two record by record. Stop the server using the source first.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *from == "" || *to == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	src, err := openStore(ctx, *from)
	if err != nil {
		fmt.Fprintf(stderr, "controlplane store copy: --from %s: %v\n", redactSpec(*from), err)
		return 1
	}
	defer src.Close()
	dst, err := openStore(ctx, *to)
	if err != nil {
		fmt.Fprintf(stderr, "controlplane store copy: --to %s: %v\n", redactSpec(*to), err)
		return 1
	}
	defer dst.Close()
	start := time.Now()
	n, err := storecopy.Copy(ctx, src, dst)
	if err != nil {
		fmt.Fprintf(stderr, "controlplane store copy: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "copied %d tenants, %d tasks, %d specs, %d events, %d interrupts, %d verdicts, %d obligations, %d webhook notifications, %d schedules in %s\n",
		n.Tenants, n.Tasks, n.Specs, n.Events, n.Interrupts, n.Verdicts, n.Obligations, n.Notifications, n.Schedules, time.Since(start).Round(time.Millisecond))
	if err := storecopy.Compare(ctx, src, dst); err != nil {
		fmt.Fprintf(stderr, "controlplane store copy: the stores differ after the copy:\n%v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, "compared: every record and index is the same in both stores")
	return 0
}

// openStore opens bolt:FILE or postgres:DSN.
func openStore(ctx context.Context, spec string) (storecopy.Source, error) {
	kind, where, ok := strings.Cut(spec, ":")
	switch {
	case ok && kind == "bolt" && where != "":
		return boltstore.Open(where, boltstore.Options{})
	case ok && kind == "postgres" && where != "":
		return pgstore.Open(ctx, where, pgstore.Options{})
	}
	return nil, fmt.Errorf("want bolt:FILE or postgres:DSN")
}

// redactSpec is a store spec without a password.
func redactSpec(spec string) string {
	if kind, where, ok := strings.Cut(spec, ":"); ok && kind == "postgres" {
		return kind + ":" + pgstore.Redact(where)
	}
	return spec
}
