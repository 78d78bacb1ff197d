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
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"videogen/internal/config"
	"videogen/internal/db"
	"videogen/internal/server"
	"videogen/internal/upstream/poolfile"
	"videogen/internal/upstream/providers"
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
			specs, err := poolfile.Load(file, poolfile.Options{Kinds: providers.Names(), Production: cfg.Production()}, os.Getenv)
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

It waits (--wait) until an instance has recorded the reloaded pool and prints it; exit 1 when none did.`,
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
			specs, err := poolfile.Parse(cfg.UpstreamsFile, text, poolfile.Options{Kinds: providers.Names(), Production: cfg.Production()})
			if err != nil {
				return fmt.Errorf("%s is refused, no instance was told to reload:\n%w", cfg.UpstreamsFile, err)
			}
			asked, err := bumpReload(cmd.Context(), d)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "asked every instance to reload %s (%d credential(s))\n", cfg.UpstreamsFile, len(specs))
			return awaitReload(cmd.Context(), cmd.OutOrStdout(), d, specs, asked, wait)
		},
	}
	c.Flags().DurationVar(&wait, "wait", 15*time.Second, "how long to wait for an instance to confirm (0: do not wait)")
	return c
}

// bumpReload increments the reload signal and returns when it did, as the database keeps times.
func bumpReload(ctx context.Context, d *db.DB) (time.Time, error) {
	now := db.Now()
	err := d.Tx(ctx, func(tx *gorm.DB) error {
		return tx.Clauses(clause.OnConflict{
			Columns:   []clause.Column{{Name: "name"}},
			DoUpdates: clause.Assignments(map[string]any{"seq": gorm.Expr("control_signals.seq + 1"), "updated_at": now}),
		}).Create(&models.ControlSignal{Name: server.ReloadSignal, Seq: 1, UpdatedAt: now}).Error
	})
	if err != nil {
		return now, fmt.Errorf("signal the reload: %w", err)
	}
	return now, nil
}

// awaitReload waits until every credential of the file is recorded as configured after asked.
func awaitReload(ctx context.Context, out io.Writer, d *db.DB, specs []poolfile.Spec, asked time.Time, wait time.Duration) error {
	if wait <= 0 {
		return nil
	}
	ids := make([]string, len(specs))
	for i, s := range specs {
		ids[i] = s.ID
	}
	deadline := time.Now().Add(wait)
	for {
		var n int64
		if err := d.R.WithContext(ctx).Model(&models.UpstreamCredential{}).Where("id IN ? AND updated_at >= ?", ids, asked).Count(&n).Error; err != nil {
			return fmt.Errorf("read the credentials: %w", err)
		}
		if n == int64(len(ids)) {
			fmt.Fprintf(out, "reloaded: %s\n", strings.Join(ids, ", "))
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no instance confirmed the reload within %s: is one running against this database? Its log says why it refused the file (a secret_env not set there, an id reused)", wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
