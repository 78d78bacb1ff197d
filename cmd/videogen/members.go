package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"videogen/internal/infra/db"
	"videogen/models"
)

// membersCmd reads an account's members (docs/members.md); inviting and changing them is done in the
// console, by the account's owners and admins.
func membersCmd() *cobra.Command {
	c := &cobra.Command{Use: "members", Short: "read an account's members and pending invitations"}
	var email string
	list := &cobra.Command{
		Use:   "list",
		Short: "list the members of the account of a user, their roles, and the invitations waiting",
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, u, err := openUser(cmd.Context(), email)
			if err != nil {
				return err
			}
			defer d.Close()
			ctx := cmd.Context()
			ms, err := models.Members(ctx, d.R, u.AccountID)
			if err != nil {
				return err
			}
			former, err := models.FormerMembers(ctx, d.R, u.AccountID, 100)
			if err != nil {
				return err
			}
			invs, err := models.PendingInvitations(ctx, d.R, u.AccountID, db.Now())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "account %d\n", u.AccountID)
			tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "E-MAIL\tROLE\tSTATE\tSINCE")
			for _, m := range ms {
				fmt.Fprintf(tw, "%s\t%s\tmember\t%s\n", m.Email, m.AccountRole, m.CreatedAt.UTC().Format("2006-01-02"))
			}
			for _, in := range invs {
				fmt.Fprintf(tw, "%s\t%s\tinvited (until %s)\t%s\n", in.Email, in.Role, in.ExpiresAt.UTC().Format("2006-01-02 15:04"), in.CreatedAt.UTC().Format("2006-01-02"))
			}
			for _, m := range former {
				fmt.Fprintf(tw, "%s\t%s\tremoved\t%s\n", m.Email, m.AccountRole, m.RemovedAt.UTC().Format("2006-01-02"))
			}
			return tw.Flush()
		},
	}
	list.Flags().StringVar(&email, "email", "", "the e-mail of any member of the account (required)")
	_ = list.MarkFlagRequired("email")
	c.AddCommand(list)
	// `videogen members --email E` is `videogen members list --email E`.
	c.Flags().StringVar(&email, "email", "", "as members list --email")
	c.Args = cobra.NoArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if email == "" {
			return cmd.Help()
		}
		return list.RunE(cmd, args)
	}
	return c
}
