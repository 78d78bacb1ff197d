package handlers

import (
	"errors"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"videogen/billing"
	"videogen/models"
	"videogen/views"
)

func (h *handler) walletPage(c *fiber.Ctx, p views.WalletPage) error {
	u := currentUser(c)
	acct, err := billing.Balance(c.UserContext(), h.DB, u.AccountID)
	if err != nil {
		return err
	}
	before, _ := strconv.ParseInt(c.Query("before"), 10, 64)
	entries, more, err := models.LedgerPage(c.UserContext(), h.DB.R, u.AccountID, before, 50)
	if err != nil {
		return err
	}
	p.Available, p.Reserved, p.Entries, p.Verified = acct.AvailableMicros, acct.ReservedMicros, entries, u.Verified()
	if before > 0 {
		p.First = "?"
	}
	if more {
		p.Next = "?before=" + strconv.FormatInt(entries[len(entries)-1].ID, 10)
	}
	return h.render(c, views.WalletView(h.viewer(c, "wallet"), p))
}

// showWallet answers GET /console/wallet: balances and every ledger entry with the balance after it.
func (h *handler) showWallet(c *fiber.Ctx) error { return h.walletPage(c, views.WalletPage{}) }

// Test top-ups are bounded so a typo cannot make an absurd balance.
const (
	minTestTopup = 1 * billing.PerUSD
	maxTestTopup = 1000 * billing.PerUSD
)

// addTestFunds writes a test_topup entry; only with TEST_TOPUPS=1 and a verified address.
func (h *handler) addTestFunds(c *fiber.Ctx) error {
	u := currentUser(c)
	if !h.TestTopups {
		return fiber.ErrNotFound
	}
	if !u.Verified() {
		c.Status(fiber.StatusForbidden)
		return h.walletPage(c, views.WalletPage{})
	}
	text := c.FormValue("amount")
	amount, err := billing.ParseUSD(text)
	if err != nil || amount < minTestTopup || amount > maxTestTopup {
		c.Status(fiber.StatusUnprocessableEntity)
		return h.walletPage(c, views.WalletPage{Amount: text, Error: "Enter an amount between $1 and $1,000, such as 25 or 25.50."})
	}
	_, err = billing.Credit{AccountID: u.AccountID, Kind: models.KindTestTopup, Amount: amount, At: h.Now(),
		Reason: "test funds added in the console", Actor: "user:" + strconv.FormatInt(u.ID, 10)}.Apply(c.UserContext(), h.DB)
	if err != nil && !errors.Is(err, billing.ErrDuplicateCredit) {
		return err
	}
	return redirect(c, "/console/wallet?notice=funds-added")
}
