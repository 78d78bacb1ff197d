package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"os/user"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"videogen/internal/jobs/ledgercheck"
)

func ledgerCmd() *cobra.Command {
	c := &cobra.Command{Use: "ledger", Short: "operator commands for the ledger"}
	c.AddCommand(ledgerCheckCmd())
	return c
}

func ledgerCheckCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "check",
		Short: "check every balance against its ledger entries and every task's reservation; exit 1 on drift",
		Long: `Check runs the ledger self-check once, on one consistent snapshot of the database (safe on a live
one), and prints each problem it finds:

  - an account whose available or reserved balance is not the sum of its entries' deltas, or whose
    newest entry does not record its balances;
  - a task whose reservation was not resolved exactly once: a finished task without exactly one settle
    or release after its reserve, or an unfinished one with more than its reserve;
  - an entry that took available below zero other than a refund, a dispute or a staff adjustment;
  - a counter the task store keeps (an account's waiting tasks, a credential's in-flight tasks) that is
    not the number of its tasks.

The result is recorded like the server's own checks (LEDGER_CHECK_INTERVAL): the staff overview
(/support) shows the newest, and /metrics exports it (videogen_ledger_drift_accounts).

Exit status:
  0  no drift: every balance equals its entries, every reservation was resolved exactly once
  1  drift: someone should look at the accounts listed
  2  no answer: bad usage, or the database could not be read`,
		Example: "  videogen ledger check",
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.NoArgs(cmd, args); err != nil {
				exitWith(cmd, exitTrouble, usageError(cmd, err))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := ledgerCheck(cmd.Context(), cmd.OutOrStdout())
			if err != nil {
				exitWith(cmd, exitTrouble, err)
			}
			if res.Drift() {
				// main prints it and exits 1, like audit and stripe reconcile.
				return fmt.Errorf("ledger drift: %d problem(s) in %d account(s)", len(res.Problems), len(res.Accounts))
			}
			return nil
		},
	}
	c.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		exitWith(cmd, exitTrouble, usageError(cmd, err))
		return err
	})
	return c
}

// ledgerCheck runs and records one check, prints it to out and returns it.
func ledgerCheck(ctx context.Context, out io.Writer) (ledgercheck.Result, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	d, err := openDB(ctx)
	if err != nil {
		return ledgercheck.Result{}, err
	}
	defer d.Close()
	owner := "cli"
	if u, err := user.Current(); err == nil {
		owner = "cli:" + u.Username
	}
	if host, err := os.Hostname(); err == nil {
		owner += "@" + host
	}
	res, err := ledgercheck.Check(ctx, d, owner, time.Now)
	if err != nil {
		return res, err
	}
	for _, p := range res.Problems {
		fmt.Fprintln(out, p)
	}
	if !res.Drift() {
		fmt.Fprintln(out, "no drift: every balance equals the sum of its ledger entries, every reservation was resolved exactly once")
		return res, nil
	}
	fmt.Fprintf(out, "drift in %d account(s): %s (check %d recorded)\n", len(res.Accounts), res.Row.Accounts, res.Row.ID)
	return res, nil
}
