package members_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"videogen/internal/domain/accounts"
	"videogen/internal/domain/members"
	"videogen/internal/infra/db"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestMatrix: Can says exactly what docs/members.md's matrix says, cell by cell.
func TestMatrix(t *testing.T) {
	yes := map[members.Action]string{
		members.ManageMembers:   "owner admin",
		members.RenameAccount:   "owner admin",
		members.RequireTwoStep:  "owner",
		members.SeeKeys:         "owner admin developer viewer",
		members.ManageKeys:      "owner admin developer",
		members.CreateVideos:    "owner admin developer",
		members.CancelTasks:     "owner admin developer",
		members.ManageWebhooks:  "owner admin developer",
		members.AddFunds:        "owner billing",
		members.BillingSettings: "owner billing",
		members.SeePayments:     "owner admin billing viewer",
		members.SeeStatements:   "owner admin billing viewer",
	}
	if len(yes) != len(members.Actions) {
		t.Fatalf("the test covers %d actions, the package has %d", len(yes), len(members.Actions))
	}
	for _, a := range members.Actions {
		for _, role := range append(members.Roles, "", "member", "support") {
			want := role != "" && strings.Contains(" "+yes[a]+" ", " "+role+" ")
			if got := members.Can(role, a); got != want {
				t.Errorf("Can(%q, %s) = %v, want %v", role, a, got, want)
			}
		}
	}
	if got := members.Refusal("billing", members.SeeKeys, []string{"a@example.com"}); got !=
		"Your role (billing) cannot see API keys. Only an owner, admin, developer or viewer can. Ask a@example.com." {
		t.Errorf("refusal: %q", got)
	}
	if got := members.WhoCan(members.ManageMembers); got != "an owner or admin" {
		t.Errorf("WhoCan: %q", got)
	}
}

// links records the invitations' links instead of e-mailing them.
type links struct {
	mu   sync.Mutex
	sent map[string]string
}

func (l *links) Invitation(_ *gorm.DB, to, _, _, _, _, link string, _ time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent[to] = link
	return nil
}

func (l *links) token(t *testing.T, to string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	link, ok := l.sent[to]
	if !ok {
		t.Fatalf("no invitation sent to %s", to)
	}
	return link[strings.Index(link, "token=")+6:]
}

type rig struct {
	svc   *members.Service
	d     *db.DB
	links *links
	clock *time.Time
}

func newRig(t *testing.T, dbURL string) *rig {
	d := testkit.OpenDB(t, dbURL)
	now := time.Now()
	r := &rig{d: d, links: &links{sent: map[string]string{}}, clock: &now}
	r.svc = &members.Service{DB: d, Notify: r.links, BaseURL: "http://example.test", Now: func() time.Time { return *r.clock }}
	return r
}

// join invites email into by's account with role and accepts, returning the new member.
func (r *rig) join(t *testing.T, by *models.User, email, role string) *models.User {
	t.Helper()
	ctx := context.Background()
	if _, err := r.svc.Invite(ctx, by, email, role); err != nil {
		t.Fatalf("invite %s: %v", email, err)
	}
	u, errs, err := r.svc.Accept(ctx, members.Acceptance{Token: r.links.token(t, email), Password: "paper-boats-float-42", AcceptTerms: true})
	if err != nil || len(errs) > 0 {
		t.Fatalf("accept %s: %v %v", email, err, errs)
	}
	return u
}

func (r *rig) owners(t *testing.T, accountID int64) int64 {
	var n int64
	if err := r.d.R.Model(&models.User{}).Where("account_id = ? AND account_role = 'owner' AND removed_at IS NULL", accountID).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLastOwnerUnderConcurrency: two owners demoting each other at the same moment, or leaving at the
// same moment, never leave the account without an owner: one wins, the other is refused with
// ErrLastOwner, on both databases, round after round.
func TestLastOwnerUnderConcurrency(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		r := newRig(t, dbURL)
		ctx := context.Background()
		a, err := accounts.Create(ctx, r.d, accounts.NewUser{Email: "ada@example.com", Verified: true})
		if err != nil {
			t.Fatal(err)
		}
		b := r.join(t, a, "bob@example.com", models.AccountOwner)
		for round := range 10 {
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, pair := range [][2]*models.User{{a, b}, {b, a}} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = r.svc.ChangeRole(ctx, pair[0], pair[1].ID, models.AccountViewer)
				}()
			}
			wg.Wait()
			refused := 0
			for _, err := range errs {
				switch {
				case err == nil:
				case errors.Is(err, members.ErrLastOwner), isRefused(err):
					// The loser either finds the other to be the last owner, or finds itself demoted already.
					refused++
				default:
					t.Fatalf("round %d: %v", round, err)
				}
			}
			if n := r.owners(t, a.AccountID); n != 1 || refused != 1 {
				t.Fatalf("round %d: %d owners left, %d refusals (%v)", round, n, refused, errs)
			}
			// Make both owners again for the next round: whoever is still owner promotes the other.
			for _, pair := range [][2]*models.User{{a, b}, {b, a}} {
				if err := r.svc.ChangeRole(ctx, pair[0], pair[1].ID, models.AccountOwner); err == nil {
					break
				}
			}
			if n := r.owners(t, a.AccountID); n != 2 {
				t.Fatalf("round %d: %d owners after restoring", round, n)
			}
		}
		// Both leaving at once: one leaves, the last owner stays.
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, u := range []*models.User{a, b} {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = r.svc.Leave(ctx, u) }()
		}
		wg.Wait()
		if (errs[0] == nil) == (errs[1] == nil) || r.owners(t, a.AccountID) != 1 {
			t.Fatalf("both owners leaving at once: %v; %d owners", errs, r.owners(t, a.AccountID))
		}
		for _, err := range errs {
			if err != nil && !errors.Is(err, members.ErrLastOwner) {
				t.Fatalf("the owner who stayed was refused with %v", err)
			}
		}
	})
}

func isRefused(err error) bool {
	var r *members.Refused
	return errors.As(err, &r)
}

// TestInvitationRules: what an invitation may not do, and its link's life.
func TestInvitationRules(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		r := newRig(t, dbURL)
		ctx := context.Background()
		owner, err := accounts.Create(ctx, r.d, accounts.NewUser{Email: "olga@example.com", Verified: true})
		if err != nil {
			t.Fatal(err)
		}
		other, err := accounts.Create(ctx, r.d, accounts.NewUser{Email: "solo@example.com", Verified: true})
		if err != nil {
			t.Fatal(err)
		}
		admin := r.join(t, owner, "adam@example.com", models.AccountAdmin)
		viewer := r.join(t, owner, "vera@example.com", models.AccountViewer)

		for _, tc := range []struct {
			name       string
			by         *models.User
			email      string
			role       string
			refused    bool   // *Refused
			invalidMsg string // *Invalid containing
		}{
			{"a viewer invites", viewer, "x@example.com", models.AccountViewer, true, ""},
			{"an admin invites an owner", admin, "x@example.com", models.AccountOwner, true, ""},
			{"an admin invites billing", admin, "x@example.com", models.AccountBilling, true, ""},
			{"an admin invites their own second address as billing", admin, "adam+money@example.com", models.AccountBilling, true, ""},
			{"not an address", owner, "not-an-address", models.AccountViewer, false, "Enter an e-mail address"},
			{"no such role", owner, "x@example.com", "god", false, "Choose a role"},
			{"a member already", owner, "VERA@example.com", models.AccountViewer, false, "already a member"},
		} {
			_, err := r.svc.Invite(ctx, tc.by, tc.email, tc.role)
			var inv *members.Invalid
			switch {
			case tc.refused && !isRefused(err):
				t.Errorf("%s: %v, want a refusal", tc.name, err)
			case tc.invalidMsg != "" && (!errors.As(err, &inv) || !strings.Contains(inv.Message, tc.invalidMsg)):
				t.Errorf("%s: %v, want %q", tc.name, err, tc.invalidMsg)
			}
		}

		// An address that signs in to another account is invited as any other — the inviter learns nothing
		// of other accounts' logins — and its page, read by the address's owner only, says why it cannot
		// join; accepting is refused, and the login stays where it is.
		if _, err := r.svc.Invite(ctx, owner, other.Email, models.AccountViewer); err != nil {
			t.Fatalf("inviting another account's login: %v", err)
		}
		elsewhere := r.links.token(t, other.Email)
		if p, err := r.svc.Peek(ctx, elsewhere); err != nil || !p.Elsewhere {
			t.Fatalf("the page of an invitation to another account's login: %v %+v", err, p)
		}
		var refusedHere *members.Invalid
		if _, _, err := r.svc.Accept(ctx, members.Acceptance{Token: elsewhere, Password: "paper-boats-float-42", AcceptTerms: true}); !errors.As(err, &refusedHere) ||
			!strings.Contains(refusedHere.Message, "one login belongs to one account") {
			t.Fatalf("accepting with another account's login: %v", err)
		}
		var solo models.User
		r.d.R.Take(&solo, other.ID)
		if solo.AccountID != other.AccountID || solo.AccountRole != models.AccountOwner {
			t.Fatalf("the other account's login moved: %+v", solo)
		}

		// An admin may invite a developer; a second invitation (the owner's, as billing) replaces the first,
		// whose link dies.
		if _, err := r.svc.Invite(ctx, admin, "dev@example.com", models.AccountDeveloper); err != nil {
			t.Fatal(err)
		}
		first := r.links.token(t, "dev@example.com")
		if _, err := r.svc.Invite(ctx, owner, "dev@example.com", models.AccountBilling); err != nil {
			t.Fatal(err)
		}
		second := r.links.token(t, "dev@example.com")
		if _, err := r.svc.Peek(ctx, first); !errors.Is(err, members.ErrBadInvitation) {
			t.Fatalf("the replaced link: %v", err)
		}
		// A weak password spends nothing; then the link works once.
		if _, errs, err := r.svc.Accept(ctx, members.Acceptance{Token: second, Password: "short", AcceptTerms: true}); err != nil || errs["password"] == "" {
			t.Fatalf("weak password: %v %v", err, errs)
		}
		u, _, err := r.svc.Accept(ctx, members.Acceptance{Token: second, Password: "paper-boats-float-42", AcceptTerms: true})
		if err != nil || u.AccountRole != models.AccountBilling || u.AccountID != owner.AccountID || !u.Verified() {
			t.Fatalf("accept: %v %+v", err, u)
		}
		if _, _, err := r.svc.Accept(ctx, members.Acceptance{Token: second, Password: "paper-boats-float-42", AcceptTerms: true}); !errors.Is(err, members.ErrBadInvitation) {
			t.Fatalf("the link used twice: %v", err)
		}

		// Seven days on, a link no longer works.
		if _, err := r.svc.Invite(ctx, owner, "late@example.com", models.AccountViewer); err != nil {
			t.Fatal(err)
		}
		late := r.links.token(t, "late@example.com")
		*r.clock = r.clock.Add(members.InvitationTTL + time.Second)
		if _, _, err := r.svc.Accept(ctx, members.Acceptance{Token: late, Password: "paper-boats-float-42", AcceptTerms: true}); !errors.Is(err, members.ErrBadInvitation) {
			t.Fatalf("a link 7 days old: %v", err)
		}

		// An admin neither demotes nor removes an owner, and nobody removes themselves.
		if err := r.svc.ChangeRole(ctx, admin, owner.ID, models.AccountViewer); !isRefused(err) {
			t.Fatalf("an admin demoting the owner: %v", err)
		}
		if _, err := r.svc.Remove(ctx, admin, owner.ID, false); !isRefused(err) {
			t.Fatalf("an admin removing the owner: %v", err)
		}
		var inv *members.Invalid
		if _, err := r.svc.Remove(ctx, owner, owner.ID, false); !errors.As(err, &inv) {
			t.Fatalf("removing oneself: %v", err)
		}
		if err := r.svc.ChangeRole(ctx, owner, owner.ID, models.AccountAdmin); !errors.Is(err, members.ErrLastOwner) {
			t.Fatalf("the last owner demoting themselves: %v", err)
		}
		if err := r.svc.Leave(ctx, owner); !errors.Is(err, members.ErrLastOwner) {
			t.Fatalf("the last owner leaving: %v", err)
		}
		// A member of another account is not ours to change.
		if err := r.svc.ChangeRole(ctx, owner, other.ID, models.AccountViewer); !errors.Is(err, members.ErrNoMember) {
			t.Fatalf("changing another account's user: %v", err)
		}
		// Removed, a member's own role changes nothing any more: they act no more.
		if _, err := r.svc.Remove(ctx, owner, admin.ID, false); err != nil {
			t.Fatal(err)
		}
		if _, err := r.svc.Invite(ctx, admin, "y@example.com", models.AccountViewer); !isRefused(err) {
			t.Fatalf("a removed admin inviting: %v", err)
		}
		// Invited again, the former member comes back with their row (and its history).
		back := r.join(t, owner, "adam@example.com", models.AccountDeveloper)
		if back.ID != admin.ID || back.Removed() || back.AccountRole != models.AccountDeveloper {
			t.Fatalf("the former member back: %+v", back)
		}
	})
}

// TestRoleChangeRules: who may give which role. An owner any; an admin only admin, developer or viewer,
// never to or from owner or billing (money powers the admin lacks), and never their own role.
func TestRoleChangeRules(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		r := newRig(t, dbURL)
		ctx := context.Background()
		owner, err := accounts.Create(ctx, r.d, accounts.NewUser{Email: "olga@example.com", Verified: true})
		if err != nil {
			t.Fatal(err)
		}
		admin := r.join(t, owner, "adam@example.com", models.AccountAdmin)
		admin2 := r.join(t, owner, "adele@example.com", models.AccountAdmin)
		dev := r.join(t, owner, "dev@example.com", models.AccountDeveloper)
		bill := r.join(t, owner, "bill@example.com", models.AccountBilling)
		for _, tc := range []struct {
			name    string
			by      *models.User
			target  *models.User
			role    string
			refused bool
		}{
			{"an admin makes a developer billing", admin, dev, models.AccountBilling, true},
			{"an admin makes themselves billing", admin, admin, models.AccountBilling, true},
			{"an admin makes themselves owner", admin, admin, models.AccountOwner, true},
			{"an admin changes their own role", admin, admin, models.AccountViewer, true},
			{"an admin makes a developer owner", admin, dev, models.AccountOwner, true},
			{"an admin changes billing's role", admin, bill, models.AccountViewer, true},
			{"an admin changes the owner's role", admin, owner, models.AccountAdmin, true},
			{"an admin makes a developer a viewer", admin, dev, models.AccountViewer, false},
			{"an admin makes a viewer an admin", admin, dev, models.AccountAdmin, false},
			{"an admin makes another admin a developer", admin, admin2, models.AccountDeveloper, false},
			{"the owner makes an admin billing", owner, admin2, models.AccountBilling, false},
		} {
			err := r.svc.ChangeRole(ctx, tc.by, tc.target.ID, tc.role)
			if tc.refused != isRefused(err) || (!tc.refused && err != nil) {
				t.Errorf("%s: %v, refused want %v", tc.name, err, tc.refused)
			}
			var got models.User
			r.d.R.Take(&got, tc.target.ID)
			if tc.refused && got.AccountRole == tc.role {
				t.Errorf("%s: the role changed anyway", tc.name)
			}
		}
	})
}
