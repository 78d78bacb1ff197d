package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"videogen/internal/domain/audit"
	"videogen/internal/domain/auth"
	"videogen/internal/domain/tasks"
	"videogen/internal/infra/db"
	"videogen/internal/staff/admin"
	"videogen/models"
)

// adminService opens the database for an admin command on the user with this e-mail. There is no key
// cache in this process: running servers see a change within API_KEY_CACHE_TTL.
func adminService(ctx context.Context, email string) (*admin.Service, *models.User, func(), error) {
	d, u, err := openUser(ctx, email)
	if err != nil {
		return nil, nil, nil, err
	}
	s := &admin.Service{DB: d, Tasks: tasks.NewStore(d, db.Now), Auth: &auth.Service{DB: d, Now: db.Now}, Now: db.Now}
	return s, u, func() { _ = d.Close() }, nil
}

// accountsAdminCmds are the operator's admin actions, each recorded in the audit log with actor "cli".
func accountsAdminCmds() []*cobra.Command {
	var email, role, reason string
	roleCmd := &cobra.Command{
		Use:   "role",
		Short: "give a user the role member, support or admin (audited)",
		Long: "Give a user the role member, support or admin, recorded in the audit log with actor cli. A new staff member enrols a second " +
			"factor at their first staff page. The last admin cannot be demoted.",
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, u, done, err := adminService(cmd.Context(), email)
			if err != nil {
				return err
			}
			defer done()
			ch, err := s.SetRole(cmd.Context(), audit.CLI, u.ID, role, reason)
			if err != nil {
				return fmt.Errorf("%s: %w", u.Email, err)
			}
			if !ch.Changed() {
				fmt.Fprintf(cmd.OutOrStdout(), "%s is already %s; nothing changed\n", u.Email, ch.New)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s is now %s (was %s)\n", u.Email, ch.New, ch.Old)
			return nil
		},
	}
	roleCmd.Flags().StringVar(&email, "email", "", "the user's e-mail (required)")
	roleCmd.Flags().StringVar(&role, "role", "", "member, support or admin (required)")
	roleCmd.Flags().StringVar(&reason, "reason", "", "why (optional; kept in the audit log)")
	_ = roleCmd.MarkFlagRequired("email")
	_ = roleCmd.MarkFlagRequired("role")

	var disEmail, disReason string
	disable := &cobra.Command{
		Use:   "disable",
		Short: "disable a user's account: keys refused, users signed out, waiting tasks refunded (audited)",
		Long: "Disable the account of the user with this e-mail, recorded in the audit log with actor cli: its keys answer 401 " +
			"account_disabled (running servers see it within API_KEY_CACHE_TTL), its users are signed out and cannot sign in, and its " +
			"tasks not yet sent upstream fail with account_disabled and are refunded; tasks already sent upstream finish and are charged.",
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, u, done, err := adminService(cmd.Context(), disEmail)
			if err != nil {
				return err
			}
			defer done()
			r, err := s.Disable(cmd.Context(), audit.CLI, u.AccountID, disReason)
			if err != nil {
				return fmt.Errorf("account %d (%s): %w", u.AccountID, u.Email, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "disabled account %d (%s): %d keys refused, %d sessions ended, %d waiting tasks failed and %s released, %d tasks already sent upstream will finish\n",
				u.AccountID, u.Email, r.Keys, r.Sessions, len(r.Failed), r.Refund.USD(), r.Running)
			return nil
		},
	}
	disable.Flags().StringVar(&disEmail, "email", "", "e-mail of a user of the account (required)")
	disable.Flags().StringVar(&disReason, "reason", "", "why (required; kept in the audit log)")
	_ = disable.MarkFlagRequired("email")
	_ = disable.MarkFlagRequired("reason")

	var enEmail, enReason string
	enable := &cobra.Command{
		Use:   "enable",
		Short: "re-enable a disabled account (audited)",
		Long: "Re-enable the account of the user with this e-mail, recorded in the audit log with actor cli: its keys work again " +
			"(running servers see it within API_KEY_CACHE_TTL) and its users may sign in.",
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, u, done, err := adminService(cmd.Context(), enEmail)
			if err != nil {
				return err
			}
			defer done()
			if err := s.Enable(cmd.Context(), audit.CLI, u.AccountID, enReason); err != nil {
				return fmt.Errorf("account %d (%s): %w", u.AccountID, u.Email, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "enabled account %d (%s): its keys work again and its users may sign in\n", u.AccountID, u.Email)
			return nil
		},
	}
	enable.Flags().StringVar(&enEmail, "email", "", "e-mail of a user of the account (required)")
	enable.Flags().StringVar(&enReason, "reason", "", "why (required; kept in the audit log)")
	_ = enable.MarkFlagRequired("email")
	_ = enable.MarkFlagRequired("reason")

	var resetEmail, resetReason string
	reset := &cobra.Command{
		Use:   "reset-2fa",
		Short: "forget a staff member's or a member's authenticator and recovery codes, for one who lost both (audited)",
		Long: "Forget the second factor of the user with this e-mail (their authenticator and recovery codes) and sign them out, " +
			"recorded in the audit log with actor cli. Their next staff page asks them to enrol a new authenticator (a member's next console page, when their account requires two steps). Check who is asking first: " +
			"this is the door around the second factor.",
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, u, done, err := adminService(cmd.Context(), resetEmail)
			if err != nil {
				return err
			}
			defer done()
			if err := s.ResetSecondFactor(cmd.Context(), audit.CLI, u.ID, resetReason); err != nil {
				return fmt.Errorf("%s: %w", u.Email, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s has no second factor now and is signed out; their next staff page asks them to enrol again\n", u.Email)
			return nil
		},
	}
	reset.Flags().StringVar(&resetEmail, "email", "", "the user's e-mail (required)")
	reset.Flags().StringVar(&resetReason, "reason", "", "why (required; kept in the audit log)")
	_ = reset.MarkFlagRequired("email")
	_ = reset.MarkFlagRequired("reason")
	return []*cobra.Command{roleCmd, disable, enable, reset}
}
