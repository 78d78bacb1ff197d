package main

import (
	"fmt"
	"runtime/debug"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"videogen/internal/money"
	"videogen/models"
)

// keysListCmd is `videogen keys list --email E`: the keys of a user's account, newest first, by their
// display prefix (the secret is never stored, so never shown).
func keysListCmd() *cobra.Command {
	var email string
	c := &cobra.Command{
		Use:   "list",
		Short: "list the API keys of a user's account: prefix, name, created, last used, limits, revoked",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, u, err := openUser(cmd.Context(), email)
			if err != nil {
				return err
			}
			defer d.Close()
			keys, err := models.AccountKeys(cmd.Context(), d.R, u.AccountID)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "account %d: %d keys\n", u.AccountID, len(keys))
			tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PREFIX\tNAME\tCREATED\tLAST USED\tLIMIT\tMODELS\tSTATE")
			for _, k := range keys {
				limit := "-"
				if k.SpendLimitMicros != nil {
					limit = money.Micros(*k.SpendLimitMicros).USD() + "/" + k.LimitPeriod
				}
				models := k.AllowedModels
				if models == "" {
					models = "all"
				}
				state := "active"
				if k.RevokedAt != nil {
					state = "revoked " + day(*k.RevokedAt)
				}
				last := "never"
				if k.LastUsedAt != nil {
					last = day(*k.LastUsedAt)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.Prefix, orDash(k.Name), day(k.CreatedAt), last, limit, models, state)
			}
			return tw.Flush()
		},
	}
	c.Flags().StringVar(&email, "email", "", "the e-mail of any member of the account (required)")
	_ = c.MarkFlagRequired("email")
	return c
}

// accountsListCmd is `videogen accounts list`: the accounts, newest first, with their owner, members,
// balances and state.
func accountsListCmd() *cobra.Command {
	var limit int
	c := &cobra.Command{
		Use:   "list",
		Short: "list the accounts, newest first: id, name, owner, members, available and reserved balance, state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 {
				return fmt.Errorf("--limit must be at least 1, not %d", limit)
			}
			d, err := openDB(cmd.Context())
			if err != nil {
				return err
			}
			defer d.Close()
			var rows []struct {
				models.Account
				Owner   string
				Members int
			}
			// One query: the owner (the earliest owner of the account) and the member count come with the row.
			err = d.R.WithContext(cmd.Context()).Table("accounts").
				Select(`accounts.*,
					(SELECT u.email FROM users u WHERE u.account_id = accounts.id AND u.account_role = ? ORDER BY u.id LIMIT 1) AS owner,
					(SELECT COUNT(*) FROM users u WHERE u.account_id = accounts.id) AS members`, models.AccountOwner).
				Order("accounts.id DESC").Limit(limit).Scan(&rows).Error
			if err != nil {
				return fmt.Errorf("read accounts: %w", err)
			}
			out := cmd.OutOrStdout()
			tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tOWNER\tMEMBERS\tAVAILABLE\tRESERVED\tCREATED\tSTATE")
			for _, a := range rows {
				state := "active"
				if a.DisabledAt != nil {
					state = "disabled " + day(*a.DisabledAt)
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", a.ID, orDash(a.Name), orDash(a.Owner), a.Members,
					money.Micros(a.AvailableMicros).USD(), money.Micros(a.ReservedMicros).USD(), day(a.CreatedAt), state)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(rows) == limit {
				fmt.Fprintf(out, "(the newest %d; --limit shows more)\n", limit)
			}
			return nil
		},
	}
	c.Flags().IntVar(&limit, "limit", 100, "list at most this many accounts")
	return c
}

func day(t time.Time) string { return t.UTC().Format("2006-01-02") }

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

// buildVersion is set by `make build` (-ldflags -X main.buildVersion=…) to `git describe`'s answer.
var buildVersion string

// version is the build's version: what `make build` stamped, else the module's, else the commit Go
// stamped into the binary from the checkout (with "+dirty" when the tree had changes).
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return orDash(buildVersion)
	}
	if buildVersion != "" {
		return buildVersion + " (" + info.GoVersion + ")"
	}
	v := info.Main.Version
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" && (v == "" || v == "(devel)") {
		v = rev[:min(len(rev), 12)]
		if modified == "true" {
			v += "+dirty"
		}
	}
	if v == "" {
		v = "(devel)"
	}
	return v + " (" + info.GoVersion + ")"
}
