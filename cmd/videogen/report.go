package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"videogen/internal/money"
	"videogen/internal/staff/margin"
)

// reportDays is how many UTC days `report margin` covers when not told, today included.
const reportDays = 30

func reportCmd() *cobra.Command {
	c := &cobra.Command{Use: "report", Short: "operator reports read from the database"}
	c.AddCommand(reportMarginCmd())
	return c
}

func reportMarginCmd() *cobra.Command {
	var from, to string
	var asCSV bool
	c := &cobra.Command{
		Use:   "margin",
		Short: "revenue, upstream cost and margin per model and UTC day, from the settled tasks",
		Long: `Margin sums, for each UTC day from --from to --to (both included) and each model, the tasks that
were charged: their revenue (what the customer paid, the task's amount), their upstream cost (at the
operator's configured price, recorded when the output was copied) and the margin, revenue minus cost.
A task counts on the day it completed. Failed tasks were charged nothing and are left out, whatever
they cost upstream. Below the days come each model's subtotal and the grand total.

A task without a recorded cost (completed before costs were recorded) counts as costing 0 and is
counted in UNCOSTED: while that is not 0, the margin shown is too high.

Amounts are US dollars, exact to the micro-dollar. MARGIN % is the margin's share of revenue, rounded
to one decimal ("–" without revenue). With --csv, one line per day and model, then one per model
(row model_total) and the total (row total), with amounts in dollars and in micro-dollars.

Exit status:
  0  the report was printed
  2  no answer: bad usage (a date not YYYY-MM-DD, --from after --to, more than 366 days), or the
     database could not be read`,
		Example: "  videogen report margin\n  videogen report margin --from 2026-03-01 --to 2026-03-31 --csv > march.csv",
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.NoArgs(cmd, args); err != nil {
				exitWith(cmd, exitTrouble, usageError(cmd, err))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			first, last, err := marginRange(from, to, time.Now())
			if err != nil {
				exitWith(cmd, exitTrouble, usageError(cmd, err))
			}
			if err := reportMargin(cmd.Context(), cmd.OutOrStdout(), first, last, asCSV); err != nil {
				exitWith(cmd, exitTrouble, err)
			}
			return nil
		},
	}
	c.Flags().StringVar(&from, "from", "", fmt.Sprintf("first UTC day, YYYY-MM-DD (default: %d days before --to)", reportDays-1))
	c.Flags().StringVar(&to, "to", "", "last UTC day, YYYY-MM-DD, included (default: today)")
	c.Flags().BoolVar(&asCSV, "csv", false, "print CSV instead of a table")
	c.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		exitWith(cmd, exitTrouble, usageError(cmd, err))
		return err
	})
	return c
}

// marginRange reads --from and --to; an empty --to is now's UTC day and an empty --from the 30 days
// ending with --to.
func marginRange(from, to string, now time.Time) (time.Time, time.Time, error) {
	last := margin.Day(now)
	if to != "" {
		t, err := time.Parse(time.DateOnly, to)
		if err != nil {
			return t, t, fmt.Errorf("--to %q is not a day: use YYYY-MM-DD", to)
		}
		last = t
	}
	first := last.AddDate(0, 0, -(reportDays - 1))
	if from != "" {
		t, err := time.Parse(time.DateOnly, from)
		if err != nil {
			return t, t, fmt.Errorf("--from %q is not a day: use YYYY-MM-DD", from)
		}
		first = t
	}
	return margin.CheckRange(first, last)
}

// reportMargin reads the report and prints it to out.
func reportMargin(ctx context.Context, out io.Writer, from, to time.Time, asCSV bool) error {
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
	res, err := margin.Report(ctx, d, from, to)
	if err != nil {
		return err
	}
	if asCSV {
		return writeMarginCSV(out, res)
	}
	return writeMarginTable(out, res)
}

func writeMarginTable(out io.Writer, res margin.Result) error {
	span := fmt.Sprintf("from %s to %s", res.From.Format(time.DateOnly), res.To.Format(time.DateOnly))
	if len(res.Rows) == 0 {
		_, err := fmt.Fprintf(out, "no task was charged %s (UTC days)\n", span)
		if err == nil {
			err = writeFailedLocally(out, res.FailedLocally)
		}
		return err
	}
	fmt.Fprintf(out, "margin %s (UTC days), in USD: tasks charged, by the day they completed\n\n", span)
	line := func(day, model string, f margin.Figures) []string {
		return []string{day, model, strconv.FormatInt(f.Tasks, 10), f.Revenue.String(), f.Cost.String(),
			f.Margin().String(), f.MarginPercent(), strconv.FormatInt(f.Uncosted, 10)}
	}
	rows := [][]string{{"DAY", "MODEL", "TASKS", "REVENUE", "COST", "MARGIN", "MARGIN %", "UNCOSTED"}}
	for _, r := range res.Rows {
		rows = append(rows, line(r.Day.Format(time.DateOnly), r.Model, r.Figures))
	}
	rows = append(rows, nil)
	for _, m := range res.Models {
		rows = append(rows, line("all days", m.Model, m.Figures))
	}
	rows = append(rows, nil, line("all days", "all models", res.Total))
	if err := writeTable(out, rows, []bool{false, false, true, true, true, true, true, true}); err != nil {
		return err
	}
	if n := res.Total.Uncosted; n > 0 {
		if _, err := fmt.Fprintf(out, "\ntasks without a recorded upstream cost (UNCOSTED): %d of %d. They count as costing 0, so the margin shown is too high.\n",
			n, res.Total.Tasks); err != nil {
			return err
		}
	}
	return writeFailedLocally(out, res.FailedLocally)
}

// writeFailedLocally tells the upstream cost of tasks we failed while the provider still had them: a
// leak to see, not in the margin above (docs/upstreams.md#cancel).
func writeFailedLocally(out io.Writer, f margin.Figures) error {
	if f.Tasks == 0 {
		return nil
	}
	_, err := fmt.Fprintf(out, "\nfailed here while upstream (run timeout; refunded, so not above): %d task(s), expected upstream cost %s USD", f.Tasks, f.Cost)
	if err == nil && f.Uncosted > 0 {
		_, err = fmt.Fprintf(out, " (%d without a price, counted as 0)", f.Uncosted)
	}
	if err == nil {
		_, err = fmt.Fprintln(out, ". Where the provider could not be made to stop them it bills them.")
	}
	return err
}

// marginCSVHeader names the CSV's columns; amounts come twice, in dollars with six decimals for people
// and spreadsheets, in micro-dollars for programs that sum them.
var marginCSVHeader = []string{"row", "day", "model", "tasks", "revenue_usd", "cost_usd", "margin_usd", "margin_pct", "uncosted",
	"revenue_micros", "cost_micros", "margin_micros"}

func writeMarginCSV(out io.Writer, res margin.Result) error {
	w := csv.NewWriter(out)
	line := func(kind, day, model string, f margin.Figures) []string {
		// An empty cell rather than "–" without revenue: spreadsheets read it as no value.
		pct := ""
		if p, ok := f.MarginPermille(); ok {
			pct = margin.PermilleString(p)
		}
		return []string{kind, day, model, strconv.FormatInt(f.Tasks, 10), f.Revenue.String(), f.Cost.String(), f.Margin().String(),
			pct, strconv.FormatInt(f.Uncosted, 10), micros(f.Revenue), micros(f.Cost), micros(f.Margin())}
	}
	_ = w.Write(marginCSVHeader)
	for _, r := range res.Rows {
		_ = w.Write(line("day", r.Day.Format(time.DateOnly), r.Model, r.Figures))
	}
	for _, m := range res.Models {
		_ = w.Write(line("model_total", "", m.Model, m.Figures))
	}
	_ = w.Write(line("total", "", "", res.Total))
	if res.FailedLocally.Tasks > 0 {
		_ = w.Write(line("failed_locally", "", "", res.FailedLocally))
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return fmt.Errorf("write the CSV: %w", err)
	}
	return nil
}

func micros(m money.Micros) string { return strconv.FormatInt(int64(m), 10) }

// writeTable writes rows aligned in columns: the columns marked in right (figures) flush right, the
// others flush left; a nil row is a blank line between sections. tabwriter aligns only to the left, so
// the right-aligned cells are padded here first; and its blank lines are made of empty cells (a line
// without cells would restart the columns), whose padding is trimmed afterwards.
func writeTable(out io.Writer, rows [][]string, right []bool) error {
	width := make([]int, len(right))
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		cells := make([]string, len(right))
		for i, c := range r {
			if right[i] {
				c = strings.Repeat(" ", width[i]-utf8.RuneCountInString(c)) + c
			}
			cells[i] = c
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for line := range strings.Lines(buf.String()) {
		if _, err := io.WriteString(out, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}
