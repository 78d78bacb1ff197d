package console

import (
	"videogen/handlers/web"

	"errors"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"videogen/billing"
	"videogen/billing/payments"
	"videogen/internal/domain/accounts"
	"videogen/internal/money"
	"videogen/models"
	"videogen/views/customer"
)

// presets are the one-click top-up amounts offered beside the custom amount (those within the bounds).
var presets = []money.Micros{10 * money.PerUSD, 25 * money.PerUSD, 100 * money.PerUSD}

func (h *Handler) walletPage(c *fiber.Ctx, p customer.WalletPage) error {
	u := web.CurrentUser(c)
	ctx := c.UserContext()
	acct, err := billing.Balance(ctx, h.DB, u.AccountID)
	if err != nil {
		return err
	}
	before, _ := strconv.ParseInt(c.Query("before"), 10, 64)
	entries, more, err := models.LedgerPage(ctx, h.DB.R, u.AccountID, before, 50)
	if err != nil {
		return err
	}
	if err := models.LedgerWithMembers(ctx, h.DB.R, u.AccountID, entries); err != nil {
		return err
	}
	p.Available, p.Reserved, p.Entries, p.Verified = acct.AvailableMicros, acct.ReservedMicros, entries, u.Verified()
	if before > 0 {
		p.First = "?"
	}
	if more {
		p.Next = "?before=" + strconv.FormatInt(entries[len(entries)-1].ID, 10)
	}
	if p.Topups, err = h.Payments.Topups(ctx, u.AccountID, 10); err != nil {
		return err
	}
	if p.Profile, err = h.Payments.Profile(ctx, u.AccountID); err != nil {
		return err
	}
	p.Cards = h.Payments.Enabled()
	if p.Cards {
		lo, hi := h.Payments.Bounds()
		p.MinTopup, p.MaxTopup = int64(lo), int64(hi)
		for _, m := range presets {
			if m >= lo && m <= hi {
				p.Presets = append(p.Presets, int64(m))
			}
		}
	} else if h.TestTopups {
		p.MinTopup, p.MaxTopup = int64(h.TestTopupMin), int64(h.TestTopupMax)
	}
	if p.AlertsForm == nil {
		p.AlertsForm = alertsFormOf(p.Profile)
	}
	if p.Billing == nil {
		p.Billing = &customer.BillingForm{BillingDetails: accounts.BillingDetailsOf(acct), Zones: zones}
	}
	return h.Render(c, customer.WalletView(h.Viewer(c, "wallet"), p))
}

// showWallet answers GET /console/wallet: balances, top-ups, balance alerts and every ledger entry.
func (h *Handler) showWallet(c *fiber.Ctx) error { return h.walletPage(c, customer.WalletPage{}) }

// walletForm answers the wallet page's forms, which post to the page's own URL so that a refused one is
// shown again where it came from: a card top-up (the default), the balance alerts, or test funds.
func (h *Handler) walletForm(c *fiber.Ctx) error {
	switch web.Posted(c, "form") {
	case "alerts":
		return h.saveAlerts(c)
	case "test":
		return h.addTestFunds(c)
	case "billing":
		return h.saveBillingDetails(c)
	}
	if !h.Payments.Enabled() {
		return h.addTestFunds(c)
	}
	return h.startTopup(c)
}

// startTopup writes a pending top-up, creates its Stripe Checkout Session and sends the browser there.
// Nothing is credited here: Stripe's webhook does that once the money is collected.
func (h *Handler) startTopup(c *fiber.Ctx) error {
	u := web.CurrentUser(c)
	if !u.Verified() {
		c.Status(fiber.StatusForbidden)
		return h.walletPage(c, customer.WalletPage{})
	}
	text := strings.TrimSpace(web.Posted(c, "preset"))
	if text == "" {
		text = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(web.Posted(c, "amount")), "$"))
	}
	lo, hi := h.Payments.Bounds()
	amountError := "Enter an amount between " + lo.USD() + " and " + hi.USD() + " in dollars and cents, such as 25 or 25.50."
	amount, err := money.ParseUSD(text)
	if err != nil {
		c.Status(fiber.StatusUnprocessableEntity)
		return h.walletPage(c, customer.WalletPage{Amount: text, Error: amountError})
	}
	_, url, err := h.Payments.StartCheckout(c.UserContext(), payments.Checkout{AccountID: u.AccountID, UserID: u.ID, Email: u.Email,
		Amount: amount, SaveCard: web.Posted(c, "save_card") != ""})
	switch {
	case errors.Is(err, payments.ErrAmount):
		c.Status(fiber.StatusUnprocessableEntity)
		return h.walletPage(c, customer.WalletPage{Amount: text, Error: amountError})
	case errors.Is(err, payments.ErrStripeUnavailable):
		c.Status(fiber.StatusServiceUnavailable)
		return h.walletPage(c, customer.WalletPage{Amount: text,
			Error: "We could not reach our payment provider, so nothing was charged. Try again in a minute."})
	case err != nil:
		return err
	}
	return c.Redirect(url, fiber.StatusSeeOther)
}

// topupWaitRefreshes is how many times the return page reloads itself (every 3 s: a minute) while the
// payment's webhook has not arrived.
const topupWaitRefreshes = 20

// showTopup answers GET /console/wallet/topups/:id, where Stripe sends the customer after paying. It
// only reads: the credit comes from the webhook, and until then the page says so and reloads itself.
func (h *Handler) showTopup(c *fiber.Ctx) error {
	u := web.CurrentUser(c)
	t, err := h.Payments.Topup(c.UserContext(), u.AccountID, c.Params("id"))
	return h.topupPage(c, t, err, false)
}

// showTopupCanceled answers GET /console/wallet/topups/:id/canceled, where Stripe sends a customer who
// left the payment page: nothing was charged.
func (h *Handler) showTopupCanceled(c *fiber.Ctx) error {
	u := web.CurrentUser(c)
	t, err := h.Payments.CancelCheckout(c.UserContext(), u.AccountID, c.Params("id"))
	return h.topupPage(c, t, err, true)
}

// topupPage renders one top-up (or the error reading it) with the balance beside it.
func (h *Handler) topupPage(c *fiber.Ctx, t *models.Topup, err error, canceled bool) error {
	if errors.Is(err, payments.ErrNoTopup) {
		return fiber.ErrNotFound
	}
	if err != nil {
		return err
	}
	acct, err := billing.Balance(c.UserContext(), h.DB, t.AccountID)
	if err != nil {
		return err
	}
	p := customer.TopupPage{Topup: *t, Available: acct.AvailableMicros, Canceled: canceled}
	if wait, _ := strconv.Atoi(c.Query("wait")); t.State == models.TopupPending && !canceled {
		if wait < topupWaitRefreshes {
			p.Refresh = "3;url=/console/wallet/topups/" + t.ID + "?wait=" + strconv.Itoa(wait+1)
		} else {
			p.GaveUpWaiting = true
		}
	}
	return h.Render(c, customer.TopupView(h.Viewer(c, "wallet"), p))
}

func alertsFormOf(p *models.BillingProfile) *customer.AlertsForm {
	f := &customer.AlertsForm{RechargeOn: p.RechargeEnabled, Errors: map[string]string{}}
	if p.LowBalanceMicros > 0 {
		f.LowBalance = strings.TrimPrefix(money.Micros(p.LowBalanceMicros).USD(), "$")
	}
	if p.RechargeBelowMicros > 0 {
		f.RechargeBelow = strings.TrimPrefix(money.Micros(p.RechargeBelowMicros).USD(), "$")
	}
	if p.RechargeAmountMicros > 0 {
		f.RechargeAmount = strings.TrimPrefix(money.Micros(p.RechargeAmountMicros).USD(), "$")
	}
	return f
}

// saveAlerts stores the low-balance warning and the auto-recharge rule.
func (h *Handler) saveAlerts(c *fiber.Ctx) error {
	u := web.CurrentUser(c)
	if !u.Verified() {
		c.Status(fiber.StatusForbidden)
		return h.walletPage(c, customer.WalletPage{})
	}
	f := &customer.AlertsForm{LowBalance: strings.TrimSpace(web.Posted(c, "low_balance")), RechargeOn: web.Posted(c, "recharge") != "",
		RechargeBelow: strings.TrimSpace(web.Posted(c, "recharge_below")), RechargeAmount: strings.TrimSpace(web.Posted(c, "recharge_amount")),
		Errors: map[string]string{}}
	var a payments.Alerts
	money := func(field, text string, optional bool) money.Micros {
		if text == "" && optional {
			return 0
		}
		m, err := money.ParseUSD(strings.TrimPrefix(text, "$"))
		if err != nil || m%(money.PerUSD/100) != 0 || m > 100_000*money.PerUSD {
			f.Errors[field] = "Enter an amount in dollars and cents, such as 20 or 20.50."
		}
		return m
	}
	a.LowBalance = money("low_balance", f.LowBalance, true)
	a.RechargeEnabled = f.RechargeOn
	a.RechargeBelow = money("recharge_below", f.RechargeBelow, !f.RechargeOn)
	a.RechargeAmount = money("recharge_amount", f.RechargeAmount, !f.RechargeOn)
	if lo, hi := h.Payments.Bounds(); f.RechargeOn && f.Errors["recharge_amount"] == "" && (a.RechargeAmount < lo || a.RechargeAmount > hi) {
		f.Errors["recharge_amount"] = "Add between " + lo.USD() + " and " + hi.USD() + " at a time."
	}
	if f.RechargeOn && f.Errors["recharge_below"] == "" && a.RechargeBelow <= 0 {
		f.Errors["recharge_below"] = "Enter the balance under which to recharge, such as 10."
	}
	if len(f.Errors) == 0 {
		err := h.Payments.SaveAlerts(c.UserContext(), u.AccountID, a)
		if errors.Is(err, payments.ErrNoCard) {
			f.Errors["recharge"] = "Auto-recharge needs a saved card: tick “Save this card for auto-recharge” on your next top-up."
		} else if err != nil {
			return err
		}
	}
	if len(f.Errors) > 0 {
		c.Status(fiber.StatusUnprocessableEntity)
		return h.walletPage(c, customer.WalletPage{AlertsForm: f})
	}
	return web.Redirect(c, "/console/wallet?notice=alerts-saved")
}

// addTestFunds writes a test_topup entry; only with TEST_TOPUPS=1 and a verified address.
func (h *Handler) addTestFunds(c *fiber.Ctx) error {
	u := web.CurrentUser(c)
	if !h.TestTopups {
		return fiber.ErrNotFound
	}
	if !u.Verified() {
		c.Status(fiber.StatusForbidden)
		return h.walletPage(c, customer.WalletPage{})
	}
	text := web.Posted(c, "amount")
	amount, err := money.ParseUSD(text)
	if err != nil || amount < h.TestTopupMin || amount > h.TestTopupMax {
		c.Status(fiber.StatusUnprocessableEntity)
		return h.walletPage(c, customer.WalletPage{Amount: text,
			Error: "Enter an amount between " + h.TestTopupMin.Label() + " and " + h.TestTopupMax.Label() + ", such as 25 or 25.50."})
	}
	_, err = billing.Credit{AccountID: u.AccountID, Kind: models.KindTestTopup, Amount: amount, At: h.Now(),
		Reason: "test funds added in the console", Actor: "user:" + strconv.FormatInt(u.ID, 10)}.Apply(c.UserContext(), h.DB)
	if err != nil && !errors.Is(err, billing.ErrDuplicateCredit) {
		return err
	}
	return web.Redirect(c, "/console/wallet?notice=funds-added")
}
