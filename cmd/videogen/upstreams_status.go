package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"videogen/internal/domain/upstream/status"
)

func upstreamsStatusCmd() *cobra.Command {
	var asJSON bool
	var fresh time.Duration
	c := &cobra.Command{
		Use:   "status",
		Short: "each upstream credential's state, load and health, as the running instances report it",
		Long: `Status lists every upstream credential the database knows, configured now or not, with:

  STATE       in service; not taking new tasks (removed from the pool file, or draining); or
              unhealthy: the provider refused the key (the reason is printed below the table)
  BREAKER     the worst circuit breaker among the instances (open, half-open, closed); unknown
              when no instance reported on the credential recently
  IN FLIGHT   tasks holding one of its slots / its concurrency
  CALLS       calls to the provider in the instances' recent windows, summed; ERRORS likewise
  P50/P95/P99 latency in milliseconds: the worst instance's (percentiles of separate instances
              cannot be combined)
  LAST ERROR  the newest error any instance saw, and how long ago

Each instance writes its view every few seconds; views older than --fresh are left out (an instance
that stopped). No secret is printed: the database holds none.

Exit status:
  0  the status was printed
  2  no answer: bad usage, or the database could not be read`,
		Example: "  videogen upstreams status\n  videogen upstreams status --json",
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.NoArgs(cmd, args); err != nil {
				exitWith(cmd, exitTrouble, usageError(cmd, err))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if fresh <= 0 {
				exitWith(cmd, exitTrouble, usageError(cmd, fmt.Errorf("--fresh must be a positive duration such as 1m, not %s", fresh)))
			}
			if err := upstreamsStatus(cmd.Context(), cmd.OutOrStdout(), fresh, asJSON); err != nil {
				exitWith(cmd, exitTrouble, err)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the credentials as a JSON array")
	c.Flags().DurationVar(&fresh, "fresh", status.DefaultFresh, "ignore instances that have not reported for this long")
	c.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		exitWith(cmd, exitTrouble, usageError(cmd, err))
		return err
	})
	return c
}

// upstreamsStatus reads the credentials' status and prints it to out.
func upstreamsStatus(ctx context.Context, out io.Writer, fresh time.Duration, asJSON bool) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	d, err := openDB(ctx)
	if err != nil {
		return err
	}
	defer d.Close()
	now := time.Now()
	rows, err := status.Read(ctx, d, now, fresh)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rows); err != nil {
			return fmt.Errorf("write the status: %w", err)
		}
		return nil
	}
	return writeUpstreamsStatus(out, rows, now, fresh)
}

func writeUpstreamsStatus(out io.Writer, rows []status.Row, now time.Time, fresh time.Duration) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(out, "no upstream credential yet: a server records its pool's credentials when it starts")
		return err
	}
	table := [][]string{{"ID", "NAME", "KIND", "STATE", "BREAKER", "IN FLIGHT", "CALLS", "ERRORS", "P50/P95/P99 MS", "LAST ERROR"}}
	unknown := false
	for _, r := range rows {
		lastError := "–"
		if r.LastError != "" {
			lastError = oneLine(r.LastError)
			if r.LastErrorAt != nil {
				lastError = ago(now.Sub(*r.LastErrorAt)) + " ago: " + lastError
			}
		}
		latency := "–"
		if r.Instances > 0 {
			latency = fmt.Sprintf("%d/%d/%d", r.P50Ms, r.P95Ms, r.P99Ms)
		}
		errors := strconv.FormatInt(r.Errors, 10)
		if r.Calls > 0 {
			errors += " (" + r.ErrorRate() + ")"
		}
		unknown = unknown || r.Breaker == status.BreakerUnknown
		table = append(table, []string{oneLine(r.ID), oneLine(r.Name), oneLine(r.Kind), r.State, oneLine(r.Breaker),
			fmt.Sprintf("%d/%d", r.InFlight, r.MaxConcurrency), strconv.FormatInt(r.Calls, 10), errors, latency, lastError})
	}
	if err := writeTable(out, table, []bool{false, false, false, false, false, true, true, true, true, false}); err != nil {
		return err
	}
	var notes []string
	for _, r := range rows {
		if r.State == status.StateRefused || r.State == status.StateNoCredit {
			when := ""
			if r.AuthErrorAt != nil {
				when = " " + ago(now.Sub(*r.AuthErrorAt)) + " ago"
			}
			what, fix := "the provider refused the key", "fix the key"
			if r.State == status.StateNoCredit {
				what, fix = "the provider account is out of credit", "top up the provider account"
			}
			notes = append(notes, fmt.Sprintf("%s: %s%s: %s (%s, then run %s)", oneLine(r.ID), what, when, oneLine(r.AuthError), fix, hint("upstreams", "reload")))
		}
		for _, alias := range slices.Sorted(maps.Keys(r.ClosedRoutes)) {
			notes = append(notes, fmt.Sprintf("%s: the provider refused the route for %s (only that model takes no new task): %s (activate the model or fix upstream_model, then run %s)",
				oneLine(r.ID), oneLine(alias), oneLine(r.ClosedRoutes[alias]), hint("upstreams", "reload")))
		}
	}
	if unknown {
		notes = append(notes, fmt.Sprintf("breaker unknown: no instance reported on the credential in the last %s (no server running, or none uses it)", ago(fresh)))
	}
	if len(notes) > 0 {
		_, err := fmt.Fprintf(out, "\n%s\n", strings.Join(notes, "\n"))
		return err
	}
	return nil
}

// oneLine keeps a table cell on its line and in its column, and the terminal out of it: an error text
// may hold newlines, tabs or escape sequences.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if !unicode.IsPrint(r) {
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// ago is a duration the way people say it: "45s", "3m", "2h", "4d" (rounded down; never negative, since
// another machine's clock may be slightly ahead).
func ago(d time.Duration) string {
	switch d = max(d, 0); {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
}
