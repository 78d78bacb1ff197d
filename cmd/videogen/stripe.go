package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"videogen/billing/payments"
	"videogen/internal/infra/config"
	"videogen/internal/infra/db"
	"videogen/internal/infra/queue"
)

// exitTrouble is `videogen stripe reconcile`'s exit status when it has no answer (bad usage, no Stripe
// key, Stripe or the database failed). Following grep's convention, 1 is an answer: differences remain
// (main exits 1 on the error RunE returns for them).
const exitTrouble = 2

func stripeCmd() *cobra.Command {
	c := &cobra.Command{Use: "stripe", Short: "operator commands for card payments through Stripe"}
	c.AddCommand(stripeReconcileCmd())
	return c
}

func stripeReconcileCmd() *cobra.Command {
	var since time.Duration
	var apply bool
	c := &cobra.Command{
		Use:   "reconcile",
		Short: "compare Stripe's paid payments with the credited top-ups; with --apply, credit payments whose webhook never arrived",
		Long: `Reconcile lists, through Stripe's API (every page), the paid Checkout Sessions and the succeeded
auto-recharge PaymentIntents created in the period, compares them with the top-ups credited in the same
period, and prints one line per difference:

  paid_not_credited   Stripe collected it, the wallet was never credited (the webhook did not arrive)
  paid_unknown_topup  Stripe collected it for a top-up videogen has no row for: check, then credit by hand
  amount_differs      credited, but not the amount Stripe reports collected
  credited_not_paid   credited, but Stripe lists no paid payment for it in the period
  flagged_for_staff   credited and matching, but flagged when it was credited (the note says why)

Payments that videogen did not start (no top-up in their metadata) are not listed. With --apply, each
paid_not_credited payment is credited now, through the same exactly-once path as the webhook (a payment
is never credited twice, however often this runs); the receipt is e-mailed by a running server. The
other differences are for staff to look at: nothing else is changed.

It needs STRIPE_SECRET_KEY (and STRIPE_API_BASE in tests) and the server's DATABASE_URL. A running
server also does this once a day on one instance (STRIPE_RECONCILE_INTERVAL) and logs each difference.

Exit status:
  0  no differences remain (with --apply, the payments credited now count as resolved)
  1  differences remain: someone should look at them
  2  no answer: bad usage, STRIPE_SECRET_KEY unset, or Stripe or the database failed`,
		Example: "  videogen stripe reconcile\n  videogen stripe reconcile --since 168h --apply",
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.NoArgs(cmd, args); err != nil {
				exitWith(cmd, exitTrouble, usageError(cmd, err))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if since <= 0 {
				exitWith(cmd, exitTrouble, usageError(cmd, fmt.Errorf("--since must be a positive duration such as 72h, not %s", since)))
			}
			remaining, err := stripeReconcile(cmd.Context(), cmd.OutOrStdout(), since, apply)
			if err != nil {
				exitWith(cmd, exitTrouble, err)
			}
			if remaining > 0 {
				// main prints it and exits 1, like audit.
				return fmt.Errorf("%d difference(s) between Stripe and the credited top-ups remain", remaining)
			}
			return nil
		},
	}
	c.Flags().DurationVar(&since, "since", 72*time.Hour, "how far back to look: payments created in this period (e.g. 72h, 720h)")
	c.Flags().BoolVar(&apply, "apply", false, "credit paid payments whose webhook never arrived (exactly once)")
	c.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		exitWith(cmd, exitTrouble, usageError(cmd, err))
		return err
	})
	return c
}

func usageError(cmd *cobra.Command, err error) error {
	return fmt.Errorf("%w (see %s --help)", err, cmd.CommandPath())
}

// exitWith ends the process with code after printing err the way main does. main knows only exit
// status 1, which this command keeps for "differences remain"; callers have run their defers (the
// database is closed) before they get here.
func exitWith(cmd *cobra.Command, code int, err error) {
	fmt.Fprintln(cmd.ErrOrStderr(), "error:", err)
	os.Exit(code)
}

// stripeReconcile runs one reconciliation over the last `period`, prints the report to out and returns
// how many differences remain (those credited now are resolved).
func stripeReconcile(ctx context.Context, out io.Writer, period time.Duration, apply bool) (int, error) {
	cfg, err := config.Load(nil)
	if err != nil {
		return 0, err
	}
	if cfg.StripeSecretKey == "" {
		return 0, errors.New("STRIPE_SECRET_KEY is not set: reconciliation reads Stripe's own records, run it with the server's Stripe settings")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := checkDatabaseExists(cfg); err != nil {
		return 0, err
	}
	d, err := db.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	if _, err := d.Migrate(ctx); err != nil {
		return 0, err
	}
	lo, hi, err := cfg.TopupBounds()
	if err != nil {
		return 0, err
	}
	log := newLogger(cfg)
	// The queues are only inserted into here, never started: a credit queues its receipt's job in its own
	// transaction, and a running server works it (docs/jobs.md, "Payments").
	q, err := queue.New(d, queue.Config{ID: cfg.WorkerID, Now: time.Now, Log: log})
	if err != nil {
		return 0, err
	}
	// Notify stays nil: reconciliation queues no e-mail itself; the notifier is used only by the receipt,
	// auto-recharge and low-balance jobs, none of which run here. Building the server's mail outbox would
	// need APP_SECRET (in development, generating DATA_DIR/app_secret) for nothing. Should a future
	// reconciliation path reach the notifier, the nil pointer panics inside its transaction, which rolls
	// back: loud, never a half-done credit.
	svc := payments.New(payments.Config{PublicBaseURL: cfg.PublicBaseURL, WebhookSecret: cfg.StripeWebhookSecret,
		MinTopup: lo, MaxTopup: hi, RechargeCap: cfg.RechargeCap, Owner: cfg.WorkerID},
		payments.Deps{DB: d, Queue: q, Stripe: payments.NewStripeClient(cfg.StripeSecretKey, cfg.StripeAPIBase, log.With("part", "stripe")),
			Log: log.With("part", "payments"), Now: time.Now})
	// Whole seconds: Stripe's created[gte] is in seconds, and the period of our own top-ups is then the
	// same instant.
	from := time.Now().Add(-period).UTC().Truncate(time.Second)
	report, err := svc.Reconcile(ctx, from, apply)
	if report != nil {
		printReconcile(out, report, period, apply)
	}
	if err != nil {
		return 0, fmt.Errorf("reconcile with Stripe: %w", err)
	}
	remaining := 0
	for _, diff := range report.Differences {
		if !diff.Applied {
			remaining++
		}
	}
	return remaining, nil
}

func printReconcile(out io.Writer, r *payments.Report, period time.Duration, apply bool) {
	fmt.Fprintf(out, "Stripe reconciliation since %s (%s): %d paid Checkout Session(s) and %d succeeded auto-recharge PaymentIntent(s) listed; %d difference(s)\n",
		r.Since.UTC().Format(time.RFC3339), period, r.Sessions, r.PaymentIntents, len(r.Differences))
	if len(r.Differences) == 0 {
		fmt.Fprintln(out, "no differences: every paid payment is credited and every credited top-up is paid")
		return
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tSTRIPE ID\tTOP-UP\tACCOUNT\tSTRIPE AMOUNT\tCREDITED\tNOTE")
	applied := 0
	for _, d := range r.Differences {
		stripeAmount, credited := d.StripeAmount.USD(), d.Credited.USD()
		switch d.Kind {
		case payments.DiffNotPaid:
			stripeAmount = "-" // Stripe lists nothing
		case payments.DiffUncredited, payments.DiffNoTopup:
			credited = "-" // nothing was, before this run
		}
		account := "-"
		if d.AccountID != 0 {
			account = fmt.Sprint(d.AccountID)
		}
		note := d.Note
		if d.Applied {
			applied++
			if !strings.HasSuffix(note, "credited now") {
				note += "; credited now"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Kind, dash(d.StripeID), dash(d.TopupID), account, stripeAmount, credited, note)
	}
	_ = tw.Flush()
	remaining := len(r.Differences) - applied
	switch {
	case apply:
		fmt.Fprintf(out, "%d credited now; %d difference(s) remain\n", applied, remaining)
	default:
		fmt.Fprintf(out, "%d difference(s); nothing was changed (--apply credits paid_not_credited payments)\n", remaining)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
