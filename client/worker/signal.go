package worker

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// RunUntilSignal runs w until Run returns, stopping it the way a process manager
// asks: the first SIGINT or SIGTERM stops leasing and lets the running tasks finish
// for at most Options.DrainTimeout, after which they are handed back (Stop); a second
// signal hands them back at once. onSignal, when not nil, is called for each signal
// before it is acted on (second is false for the first), to tell the operator. It
// returns Run's result: nil after a drain, so the process can exit 0.
func (w *Worker) RunUntilSignal(ctx context.Context, onSignal func(sig os.Signal, second bool)) error {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	stopCtx, hardStop := context.WithCancel(context.WithoutCancel(ctx))
	defer hardStop()
	stopping := false
	for {
		select {
		case err := <-done:
			return err
		case sig := <-sigs:
			if onSignal != nil {
				onSignal(sig, stopping)
			}
			if stopping {
				hardStop()
				continue
			}
			stopping = true
			go func() { _ = w.Stop(stopCtx) }()
		}
	}
}
