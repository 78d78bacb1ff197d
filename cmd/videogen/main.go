// Command videogen is the whole product in one binary: the server (default), database migrations,
// operator commands for accounts, keys and wallets, and the standalone upstream simulator.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"videogen/billing"
	"videogen/internal/domain/accounts"
	"videogen/internal/domain/apikeys"
	"videogen/internal/domain/audit"
	"videogen/internal/domain/auth"
	"videogen/internal/domain/tasks"
	"videogen/internal/infra/config"
	"videogen/internal/infra/db"
	"videogen/internal/money"
	"videogen/internal/server"
	"videogen/models"
)

func main() {
	if err := root().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func root() *cobra.Command {
	r := &cobra.Command{
		Use:           "videogen",
		Short:         "videogen: a billing-first asynchronous video generation API",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
		RunE:          func(cmd *cobra.Command, _ []string) error { return serve(cmd.Context()) },
	}
	r.AddCommand(serveCmd(), migrateCmd(), accountsCmd(), keysCmd(), walletCmd(), auditCmd(), ledgerCmd(), stripeCmd(), simCmd(),
		upstreamsCmd(), reportCmd(), generateCmd(), backupCmd(), restoreCmd(), migrateToPostgresCmd(), membersCmd())
	return r
}

func newLogger(cfg *config.Config) *slog.Logger {
	level := slog.LevelInfo
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func serveCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "serve",
		Short: "serve the API (the default command); settings come from the environment",
		RunE:  func(cmd *cobra.Command, _ []string) error { return serve(cmd.Context()) },
	}
	c.SetHelpFunc(func(cmd *cobra.Command, _ []string) {
		w := cmd.OutOrStdout()
		fmt.Fprintln(w, "videogen serve: serve the API. Every setting is an environment variable:")
		fmt.Fprintln(w)
		printVariables(w)
	})
	return c
}

func printVariables(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tMEANING")
	for _, v := range config.Variables() {
		def := v.Default
		if def == "" {
			def = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", v.Name, def, v.Help)
	}
	_ = tw.Flush()
}

func serve(ctx context.Context) error {
	cfg, err := config.Load(nil)
	if err != nil {
		return err
	}
	// Run handles SIGINT and SIGTERM itself: the first drains and stops, a second cuts the drain short.
	return server.Run(ctx, cfg, newLogger(cfg))
}

// openDB opens and migrates the database the server uses, for the operator commands. It must exist
// (checkDatabaseExists): these commands read or change a deployment's data, and never start a new one.
func openDB(ctx context.Context) (*db.DB, error) {
	_, d, err := openConfigDB(ctx)
	return d, err
}

// openConfigDB is openDB for a command that also needs the settings (PUBLIC_BASE_URL for links).
func openConfigDB(ctx context.Context) (*config.Config, *db.DB, error) {
	return openSettingsDB(ctx, false)
}

// openSettingsDB reads the settings and opens and migrates their database; create allows a SQLite
// database that does not exist yet (accounts create, the first command of a new installation), which
// is then said on stderr with where it is.
func openSettingsDB(ctx context.Context, create bool) (*config.Config, *db.DB, error) {
	cfg, err := config.Load(nil)
	if err != nil {
		return nil, nil, err
	}
	if err := checkDatabaseExists(cfg); errors.Is(err, errNoDatabase) && create {
		fmt.Fprintf(os.Stderr, "no database at %s yet: creating it (DATA_DIR or DATABASE_URL names another)\n", absPath(db.SQLitePath(cfg.DatabaseURL)))
	} else if err != nil {
		return nil, nil, err
	}
	d, err := db.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, nil, err
	}
	if _, err := d.Migrate(ctx); err != nil {
		_ = d.Close()
		return nil, nil, err
	}
	return cfg, d, nil
}

// openUser opens the database and finds the user with this e-mail; the caller closes the database.
func openUser(ctx context.Context, email string) (*db.DB, *models.User, error) {
	d, err := openDB(ctx)
	if err != nil {
		return nil, nil, err
	}
	u, err := accounts.ByEmail(ctx, d, email)
	if err != nil {
		_ = d.Close()
		return nil, nil, err
	}
	return d, u, nil
}

func migrateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "apply pending database migrations and exit",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(nil)
			if err != nil {
				return err
			}
			d, err := db.Open(cmd.Context(), cfg.DatabaseURL)
			if err != nil {
				return err
			}
			defer d.Close()
			n, err := d.Migrate(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "applied %d migration(s); schema is current\n", n)
			return nil
		},
	}
}

func accountsCmd() *cobra.Command {
	c := &cobra.Command{Use: "accounts", Short: "manage accounts"}
	var email, password, role string
	create := &cobra.Command{
		Use:   "create",
		Short: "create a verified user and its account, which they own; without --password, prints a one-time link to choose one",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, d, err := openSettingsDB(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer d.Close()
			u, err := accounts.Create(cmd.Context(), d, accounts.NewUser{Email: email, Password: password, Role: role, Verified: true})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "created %s user %s, owner of account %d\n", u.Role, u.Email, u.AccountID)
			if password != "" {
				return nil
			}
			// Without a password nobody could sign in to the console: hand the operator a link for the
			// person to choose one. The link is a secret, so it goes to stdout only, never to a log.
			a := &auth.Service{DB: d, BaseURL: cfg.PublicBaseURL, Now: db.Now}
			link, err := a.SetPasswordLink(cmd.Context(), u.ID)
			if err != nil {
				return fmt.Errorf("%s was created, but without a link to choose a password (use \"Forgot your password?\" on the sign-in page): %w", u.Email, err)
			}
			fmt.Fprintf(out, "To choose a console password, open this link; it works once, for %d hours:\n%s\n", int(auth.SetPasswordTTL.Hours()), link)
			return nil
		},
	}
	create.Flags().StringVar(&email, "email", "", "e-mail address (required)")
	create.Flags().StringVar(&password, "password", "", "password for the console (optional, at least 10 characters; without it a one-time link to choose one is printed)")
	// The staff role, named so that it is not taken for a role in the account (owner, admin, developer…,
	// which the console sets): "none" (or "member") for a customer, support or admin for staff.
	create.Flags().StringVar(&role, "staff-role", models.RoleMember, "none, support or admin: the user's staff role (none for a customer; the user owns their account either way)")
	create.Flags().StringVar(&role, "role", models.RoleMember, "")
	_ = create.Flags().MarkDeprecated("role", "use --staff-role")
	create.PreRunE = func(*cobra.Command, []string) error {
		if role == "none" {
			role = models.RoleMember
		}
		return nil
	}
	_ = create.MarkFlagRequired("email")
	c.AddCommand(append([]*cobra.Command{create, accountsListCmd()}, accountsAdminCmds()...)...)
	return c
}

func keysCmd() *cobra.Command {
	c := &cobra.Command{Use: "keys", Short: "manage API keys"}
	var email, name, prefix, spendUSD, period string
	var allowed, scopes []string
	create := &cobra.Command{
		Use:   "create",
		Short: "create an API key for a user's account; prints only the secret, which is never shown again",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("limit-period") && !cmd.Flags().Changed("spend-limit-usd") {
				return errors.New("--limit-period needs --spend-limit-usd: the period is the one the limit counts over")
			}
			limits, err := apikeys.ParseLimits(spendUSD, period, allowed, scopes)
			if err != nil {
				return limitFlagsError(err)
			}
			d, u, err := openUser(cmd.Context(), email)
			if err != nil {
				return err
			}
			defer d.Close()
			secret, k, err := apikeys.IssueLimited(cmd.Context(), d, u, name, limits, time.Now())
			if err != nil {
				return fmt.Errorf("%s: %w", u.Email, err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), secret)
			fmt.Fprintf(cmd.ErrOrStderr(), "created key %s for %s%s; store the secret now, it is not shown again\n", k.Prefix, u.Email, describeLimits(limits))
			return nil
		},
	}
	create.Flags().StringVar(&email, "email", "", "owner's e-mail (required)")
	create.Flags().StringVar(&name, "name", "", "a name to tell the key apart")
	create.Flags().StringVar(&spendUSD, "spend-limit-usd", "", "the most the key's videos may cost per --limit-period, in USD (e.g. 5 or 12.50; none: no limit)")
	create.Flags().StringVar(&period, "limit-period", "", "day or month: the period the spend limit counts over, in the account's time zone (required with --spend-limit-usd)")
	create.Flags().StringSliceVar(&allowed, "models", nil, "a model the key may use; repeat it, or separate ids with commas (none: every model)")
	create.Flags().StringSliceVar(&scopes, "scope", nil, "a scope beyond videos and uploads: webhooks:write lets the key manage webhook endpoints through the API")
	_ = create.MarkFlagRequired("email")
	revoke := &cobra.Command{
		Use:   "revoke",
		Short: "revoke an API key by its display prefix (e.g. vg_AbCdEfGh); running servers stop accepting it within API_KEY_CACHE_TTL",
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := openDB(cmd.Context())
			if err != nil {
				return err
			}
			defer d.Close()
			var before models.APIKey
			if err := d.R.WithContext(cmd.Context()).Where("prefix = ?", prefix).Take(&before).Error; err == nil && before.RevokedAt != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "%s was already revoked on %s\n", before.Prefix, before.RevokedAt.UTC().Format(time.RFC3339))
				return nil
			}
			k, err := apikeys.Revoke(cmd.Context(), d, prefix, models.RevokedByCLI, time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked %s\n", k.Prefix)
			return nil
		},
	}
	revoke.Flags().StringVar(&prefix, "prefix", "", "the key's display prefix (required)")
	_ = revoke.MarkFlagRequired("prefix")
	c.AddCommand(create, keysListCmd(), revoke)
	return c
}

// limitFlagsError words apikeys.ParseLimits' refusal with the flags' names instead of the form's.
func limitFlagsError(err error) error {
	var bad *apikeys.InvalidLimits
	if !errors.As(err, &bad) {
		return err
	}
	flags := map[string]string{"spend_limit_usd": "--spend-limit-usd", "limit_period": "--limit-period", "models": "--models"}
	var parts []string
	for _, field := range []string{"spend_limit_usd", "limit_period", "models"} {
		if msg, ok := bad.Fields[field]; ok {
			parts = append(parts, flags[field]+": "+msg)
		}
	}
	return errors.New(strings.Join(parts, "; "))
}

// describeLimits says a new key's limits for the line that reports it ("" for none).
func describeLimits(l apikeys.Limits) string {
	var out string
	if l.Spend > 0 {
		out += fmt.Sprintf(", limited to %s per %s", l.Spend.USD(), l.Period)
	}
	if len(l.Models) > 0 {
		out += ", for " + strings.Join(l.Models, ", ") + " only"
	}
	return out
}

func walletCmd() *cobra.Command {
	c := &cobra.Command{Use: "wallet", Short: "manage wallets"}
	var email, usd, reason, note string
	var allowNegative bool
	credit := &cobra.Command{
		Use: "credit",
		Short: "credit (or, with a negative amount, debit) an account's available balance: the staff console's " +
			"adjustment, audited with actor cli; prints the new balance",
		RunE: func(cmd *cobra.Command, _ []string) error {
			amount, err := money.ParseUSD(usd)
			if err != nil {
				return err
			}
			// An operator's credit is whole cents, as customers count: 1.005 is a typo, not a price. (The
			// staff console still takes micro-dollars, for the rounding corrections only staff make.)
			if amount%money.Cent != 0 {
				return fmt.Errorf("nothing changed: --usd %s has a fraction of a cent; a wallet is credited in whole cents (e.g. %s)", usd, (amount / money.Cent * money.Cent).USD())
			}
			d, u, err := openUser(cmd.Context(), email)
			if err != nil {
				return err
			}
			defer d.Close()
			e, err := billing.Adjustment{AccountID: u.AccountID, Amount: amount, Reason: reason, CustomerNote: note, AllowNegative: allowNegative,
				By: audit.CLI}.Apply(cmd.Context(), d)
			if errors.Is(err, billing.ErrWouldGoNegative) {
				a, berr := billing.Balance(cmd.Context(), d, u.AccountID)
				if berr != nil {
					return berr
				}
				return fmt.Errorf("nothing changed: the debit would take the available balance of %s (%s USD) below zero; "+
					"add --allow-negative if the account is meant to owe it", u.Email, money.Micros(a.AvailableMicros))
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "balance of %s: available %s USD, reserved %s USD\n", u.Email, money.Micros(e.AvailableAfter), money.Micros(e.ReservedAfter))
			return nil
		},
	}
	credit.Flags().StringVar(&email, "email", "", "account owner's e-mail (required)")
	credit.Flags().StringVar(&usd, "usd", "", "amount in dollars and whole cents, e.g. 25.00, or -5 to debit (required)")
	credit.Flags().StringVar(&reason, "reason", "", "why (required; kept in the ledger and the audit log, for staff: the customer never reads it)")
	credit.Flags().StringVar(&note, "customer-note", "", "what the customer reads beside the entry in their wallet (optional; without it, \"Adjustment by support\")")
	credit.Flags().BoolVar(&allowNegative, "allow-negative", false, "let a debit take the available balance below zero")
	for _, f := range []string{"email", "usd", "reason"} {
		_ = credit.MarkFlagRequired(f)
	}
	var balEmail string
	balance := &cobra.Command{
		Use:   "balance",
		Short: "print an account's available and reserved balance",
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, u, err := openUser(cmd.Context(), balEmail)
			if err != nil {
				return err
			}
			defer d.Close()
			a, err := billing.Balance(cmd.Context(), d, u.AccountID)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "balance of %s: available %s USD, reserved %s USD\n", u.Email, money.Micros(a.AvailableMicros), money.Micros(a.ReservedMicros))
			return nil
		},
	}
	balance.Flags().StringVar(&balEmail, "email", "", "account owner's e-mail (required)")
	_ = balance.MarkFlagRequired("email")
	c.AddCommand(credit, balance)
	return c
}

func auditCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "audit",
		Short: "check the ledger and the task counters against each other (safe on a live database); exit 1 if anything is off",
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := openDB(cmd.Context())
			if err != nil {
				return err
			}
			defer d.Close()
			problems, err := tasks.Audit(cmd.Context(), d)
			if err != nil {
				return err
			}
			for _, p := range problems {
				fmt.Fprintln(cmd.OutOrStdout(), p)
			}
			if len(problems) > 0 {
				return fmt.Errorf("%d problems: every balance must equal its ledger entries, every task its billing state", len(problems))
			}
			fmt.Fprintln(cmd.OutOrStdout(), "ledger and task counters agree")
			return nil
		},
	}
}
