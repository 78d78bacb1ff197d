package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"videogen/internal/domain/upstream/poolfile"
	"videogen/internal/domain/upstream/providers"
	"videogen/internal/infra/config"
	"videogen/internal/infra/db"
	"videogen/internal/server"
	"videogen/models"
)

func upstreamsCmd() *cobra.Command {
	c := &cobra.Command{Use: "upstreams", Short: "operator commands for the upstream credentials (UPSTREAMS_FILE, docs/upstreams.md)"}
	c.AddCommand(upstreamsCheckCmd(), upstreamsReloadCmd(), upstreamsStatusCmd())
	return c
}

func upstreamsCheckCmd() *cobra.Command {
	var file string
	return &cobra.Command{
		Use:   "check",
		Short: "check UPSTREAMS_FILE (or --file) as a start or reload would, secrets included, and summarise it; exit 1 if it would be refused",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(nil)
			if err != nil {
				return err
			}
			if file == "" {
				file = cfg.UpstreamsFile
			}
			if file == "" {
				return errors.New("UPSTREAMS_FILE is not set (or pass --file)")
			}
			specs, err := poolfile.Load(file, providers.Options(cfg.Production()), os.Getenv)
			if err != nil {
				return fmt.Errorf("%s would be refused:\n%w", file, err)
			}
			printSpecs(cmd.OutOrStdout(), specs)
			fmt.Fprintf(cmd.OutOrStdout(), "%s is valid: %d credential(s)\n", file, len(specs))
			return nil
		},
	}
}

// printSpecs summarises credentials without their secrets: where each secret comes from, never what it is.
func printSpecs(w io.Writer, specs []poolfile.Spec) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tBASE URL\tSECRET FROM\tMAX\tMODELS")
	for _, s := range specs {
		from := "inline secret"
		switch {
		case s.SecretEnv != "":
			from = "$" + s.SecretEnv
		case s.SecretFile != "":
			from = s.SecretFile
		}
		aliases := make([]string, 0, len(s.Models))
		for a, m := range s.Models {
			aliases = append(aliases, fmt.Sprintf("%s→%s@%s/s", a, m.UpstreamModel, m.CostPerSecond.String()))
		}
		sort.Strings(aliases)
		id := s.ID
		if s.Draining {
			id += " (draining)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", id, s.Kind, s.BaseURL, from, s.MaxConcurrency, strings.Join(aliases, ", "))
	}
	_ = tw.Flush()
}

func upstreamsReloadCmd() *cobra.Command {
	var wait time.Duration
	c := &cobra.Command{
		Use:   "reload",
		Short: "tell every running instance, through the database, to re-read UPSTREAMS_FILE",
		Long: `Reload checks UPSTREAMS_FILE here first (its shape, not its secrets, which the instances read from
their own environment), then bumps a signal in the database that every running instance checks every
UPSTREAMS_WATCH_INTERVAL. Each instance then re-reads the file and installs it whole or not at all:
new credentials take new tasks at once; removed ones take no new task but finish the tasks they hold.
An instance that refuses the file logs why and keeps its pool. Sending SIGHUP to one instance does
the same for that instance alone.

It waits (--wait) until every running instance (each publishes its upstream health every
UPSTREAMS_WATCH_INTERVAL) has answered, and prints each answer: "reloaded", or why it refused the file.
Exit 1 when any refused, any did not answer, or none answered.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, d, err := openConfigDB(cmd.Context())
			if err != nil {
				return err
			}
			defer d.Close()
			if cfg.UpstreamsFile == "" {
				return errors.New("UPSTREAMS_FILE is not set: the instances run the built-in simulator or UPSTREAM_BASE_URL, which do not reload")
			}
			text, err := os.ReadFile(cfg.UpstreamsFile)
			if err != nil {
				return fmt.Errorf("UPSTREAMS_FILE: %w", err)
			}
			specs, err := poolfile.Parse(cfg.UpstreamsFile, text, providers.Options(cfg.Production()))
			if err != nil {
				return fmt.Errorf("%s is refused, no instance was told to reload:\n%w", cfg.UpstreamsFile, err)
			}
			asked := time.Now()
			seq, err := server.BumpReload(cmd.Context(), d)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "asked every instance to reload %s (%d credential(s))\n", cfg.UpstreamsFile, len(specs))
			return awaitReload(cmd.Context(), cmd.OutOrStdout(), d, seq, asked, cfg.UpstreamsWatch, wait)
		},
	}
	c.Flags().DurationVar(&wait, "wait", 15*time.Second, "how long to wait for an instance to confirm (0: do not wait)")
	return c
}

// awaitReload waits until every running instance has acknowledged reload signal seq, and prints each
// one's answer. An instance is running if it published upstream health after the signal was sent
// (each does every UPSTREAMS_WATCH_INTERVAL, and reads the signal in the same round); one that last
// published before is taken for stopped once every running one had two rounds to answer. It fails when
// an instance refused the file, a running one did not answer within wait, or none answered.
func awaitReload(ctx context.Context, out io.Writer, d *db.DB, seq int64, asked time.Time, every, wait time.Duration) error {
	if wait <= 0 {
		return nil
	}
	deadline := time.Now().Add(wait)
	grace := asked.Add(2*every + 500*time.Millisecond)
	for {
		running, err := liveInstances(ctx, d, asked)
		if err != nil {
			return err
		}
		var acks []models.UpstreamReloadAck
		if err := d.R.WithContext(ctx).Where("seq >= ?", seq).Order("instance").Find(&acks).Error; err != nil {
			return fmt.Errorf("read the reload answers: %w", err)
		}
		answered := map[string]bool{}
		for _, a := range acks {
			answered[a.Instance] = true
		}
		var missing []string
		for _, in := range running {
			if !answered[in] {
				missing = append(missing, in)
			}
		}
		settled := len(acks) > 0 && len(missing) == 0 && time.Now().After(grace)
		if settled || time.Now().After(deadline) {
			refused := 0
			for _, a := range acks {
				if a.Error != "" {
					refused++
					fmt.Fprintf(out, "%s refused the file and keeps its pool: %s\n", a.Instance, a.Error)
				} else {
					fmt.Fprintf(out, "%s reloaded\n", a.Instance)
				}
			}
			for _, in := range missing {
				fmt.Fprintf(out, "%s is running but did not answer within %s\n", in, wait)
			}
			switch {
			case len(acks) == 0:
				return fmt.Errorf("no instance answered within %s: is one running against this database?", wait)
			case refused > 0 || len(missing) > 0:
				return fmt.Errorf("%d instance(s) refused the file and %d did not answer: those keep their pools", refused, len(missing))
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// liveInstances lists the instances that published upstream health after since (compared here, since
// SQLite keeps times as text in the zone they were written in).
func liveInstances(ctx context.Context, d *db.DB, since time.Time) ([]string, error) {
	var rows []models.UpstreamHealth
	if err := d.R.WithContext(ctx).Select("instance", "updated_at").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("read the running instances: %w", err)
	}
	seen := map[string]bool{}
	var out []string
	for _, r := range rows {
		if r.UpdatedAt.After(since) && !seen[r.Instance] {
			seen[r.Instance] = true
			out = append(out, r.Instance)
		}
	}
	sort.Strings(out)
	return out, nil
}
