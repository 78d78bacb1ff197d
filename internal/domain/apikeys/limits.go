package apikeys

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"videogen/internal/domain/accounts"
	"videogen/internal/domain/catalog"
	"videogen/internal/infra/db"
	"videogen/internal/money"
	"videogen/internal/refusal"
	"videogen/models"
)

// The periods a spend limit counts over, in the account's time zone (accounts.Location).
const (
	PeriodDay   = "day"
	PeriodMonth = "month"
)

// Limits is what a key may spend and use (docs/api-keys.md). The zero value is no limit at all.
type Limits struct {
	// Spend is the most the key's videos created in one Period may cost together; 0 is no limit.
	Spend  money.Micros
	Period string // PeriodDay or PeriodMonth when Spend > 0, else ""
	// Models are the model ids the key may create videos with, in the catalog's order; empty is every model.
	Models []string
	// Scopes are what the key may do beyond videos and uploads (ScopeWebhooks), in Scopes' order.
	Scopes []string
}

// ScopeWebhooks lets a key manage the account's webhook endpoints through the API (/v1/webhook_endpoints,
// OpenAI's webhook-endpoints API). A key without it makes videos only (docs/api-keys.md, "Scopes").
const ScopeWebhooks = "webhooks:write"

// Scopes are every scope a key may be given.
var Scopes = []string{ScopeWebhooks}

// HasScope reports whether a key's space-separated scopes include scope.
func HasScope(scopes, scope string) bool {
	for _, s := range strings.Fields(scopes) {
		if s == scope {
			return true
		}
	}
	return false
}

// LimitsOf reads a key's limits from its row.
func LimitsOf(k models.APIKey) Limits {
	var l Limits
	if k.SpendLimitMicros != nil {
		l.Spend, l.Period = money.Micros(*k.SpendLimitMicros), k.LimitPeriod
	}
	if k.AllowedModels != "" {
		l.Models = strings.Split(k.AllowedModels, ",")
	}
	l.Scopes = strings.Fields(k.Scopes)
	return l
}

// columns are the limits as the key's row stores them.
func (l Limits) columns() map[string]any {
	var spend *int64
	if l.Spend > 0 {
		v := int64(l.Spend)
		spend = &v
	}
	return map[string]any{"spend_limit_micros": spend, "limit_period": l.Period, "allowed_models": strings.Join(l.Models, ","),
		"scopes": strings.Join(l.Scopes, " ")}
}

// Allows reports whether the key may use the model.
func (l Limits) Allows(model string) bool {
	return len(l.Models) == 0 || slices.Contains(l.Models, model)
}

// MaxSpendLimit is the largest spend limit a key may have: far above any real budget, and far below
// what an int64 of micro-dollars can add up to.
const MaxSpendLimit = 1_000_000 * money.PerUSD

// InvalidLimits says which limit fields are wrong and why, by their form names (spend_limit_usd,
// limit_period, models), each message for a person.
type InvalidLimits struct {
	Fields map[string]string
}

func (e *InvalidLimits) Error() string {
	names := slices.Sorted(maps.Keys(e.Fields))
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = name + ": " + e.Fields[name]
	}
	return strings.Join(parts, "; ")
}

// ParseLimits reads a key's limits as the console's form and the command line give them: a spend limit
// in US dollars ("" for none), its period ("day" or "month"; ignored without a limit, as the form always
// posts one), and the models the key may use (none: every model). Amounts are exact to the micro-dollar
// (money.ParseUSD); a limit must be above zero.
func ParseLimits(spendUSD, period string, modelIDs, scopes []string) (Limits, error) {
	var l Limits
	bad := map[string]string{}
	spendUSD, period = strings.TrimSpace(spendUSD), strings.TrimSpace(period)
	if spendUSD != "" {
		amount, err := money.ParseUSD(spendUSD)
		switch {
		case err != nil:
			bad["spend_limit_usd"] = "Give the limit in US dollars, such as 5 or 12.50, or leave it empty for no limit."
		case amount <= 0:
			bad["spend_limit_usd"] = "A spend limit must be more than $0. Leave it empty for no limit, or revoke the key to stop it."
		case amount > MaxSpendLimit:
			bad["spend_limit_usd"] = "A spend limit may be at most " + MaxSpendLimit.Label() + "; leave it empty for no limit."
		default:
			l.Spend = amount
		}
		switch period {
		case PeriodDay, PeriodMonth:
			l.Period = period
		case "":
			bad["limit_period"] = "Choose whether the limit counts per day or per month."
		default:
			bad["limit_period"] = "The period is day or month."
		}
	} else if period != "" && period != PeriodDay && period != PeriodMonth {
		bad["limit_period"] = "The period is day or month."
	}
	seen := map[string]bool{}
	for _, m := range modelIDs {
		m = strings.TrimSpace(m)
		if m == "" || seen[m] {
			continue
		}
		if _, ok := catalog.Lookup(m); !ok {
			bad["models"] = fmt.Sprintf("%q is not a model; GET /v1/models lists them.", truncate(m))
			continue
		}
		seen[m] = true
	}
	for _, m := range catalog.Models { // the catalog's order, whatever order they came in
		if seen[m.ID] {
			l.Models = append(l.Models, m.ID)
		}
	}
	for _, sc := range scopes {
		if !slices.Contains(Scopes, sc) {
			bad["scopes"] = fmt.Sprintf("%q is not a scope; a key may have %s.", truncate(sc), strings.Join(Scopes, ", "))
		}
	}
	for _, sc := range Scopes {
		if slices.Contains(scopes, sc) {
			l.Scopes = append(l.Scopes, sc)
		}
	}
	if len(bad) > 0 {
		return Limits{}, &InvalidLimits{Fields: bad}
	}
	if l.Spend == 0 {
		l.Period = ""
	}
	return l, nil
}

func truncate(s string) string {
	if r := []rune(s); len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return s
}

// SetLimits replaces the limits of one of the account's current keys; they apply to the next create
// (every create reads them afresh). A revoked key, or another account's, is ErrNoSuchKey.
func SetLimits(ctx context.Context, d *db.DB, accountID, keyID int64, l Limits) error {
	res := d.W.WithContext(ctx).Model(&models.APIKey{}).Where("id = ? AND account_id = ? AND revoked_at IS NULL", keyID, accountID).
		Updates(l.columns())
	if res.Error != nil {
		return fmt.Errorf("set the limits of key %d: %w", keyID, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("key %d: %w", keyID, ErrNoSuchKey)
	}
	return nil
}

// PeriodOf returns the period that contains now, in loc: its first instant and the first instant of the
// next, which is when a limit counted over it resets. Midnight is found with time.Date in loc, so a day
// across a daylight-saving change lasts 23 or 25 hours, as the account's clock says.
func PeriodOf(period string, now time.Time, loc *time.Location) (start, end time.Time) {
	t := now.In(loc)
	if period == PeriodDay {
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc), time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, loc)
	}
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc), time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, loc)
}

// spendSQL is what a key has reserved or been charged for videos created in a period: a released
// reservation (a failed or cancelled video) gives its room back. A settled task was charged exactly
// what it reserved (billing.Settle charges the task's amount), so one sum over the tasks counts both.
// Served by tasks_api_key_created.
const spendSQL = `SELECT CAST(COALESCE(SUM(amount_micros), 0) AS BIGINT) FROM tasks
	WHERE api_key_id = ? AND created_at >= ? AND created_at < ? AND billing_state IN ('reserved', 'settled')`

// Guard is a key's limits as a create's transaction read them, under the lock that makes creates of a
// limited key wait for each other.
type Guard struct {
	keyID  int64
	limits Limits
	loc    *time.Location
}

// guardRow is what a create reads of its key.
type guardRow struct {
	SpendLimitMicros *int64
	LimitPeriod      string
	AllowedModels    string
	TimeZone         string
}

// GuardCreate reads the key's limits inside a create's transaction tx, before anything of the create
// is written, and returns the Guard that checks them. On PostgreSQL the row of a key with a spend limit
// is locked (FOR UPDATE) until the create commits, so that two creates of the key cannot both see room
// for one video: the second reads the spend after the first committed. SQLite's single writer runs
// whole create transactions one at a time already. A key without a spend limit is not locked: its
// creates do not wait for each other. Taken first in the transaction, so the idempotency lookup after
// it sees a concurrent retry's committed task.
//
// Lock order: a key's row before its account's (the create locks the account's row later, entering
// the backlog and reserving). Whatever else locks both takes them in that order too — removing a
// member with their keys (members.Service.Remove) locks the keys first — or PostgreSQL deadlocks.
func GuardCreate(tx *gorm.DB, postgres bool, keyID int64) (*Guard, error) {
	const q = `SELECT k.spend_limit_micros, k.limit_period, k.allowed_models, a.time_zone
		FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.id = ?`
	var rows []guardRow
	if err := tx.Raw(q, keyID).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("read the limits of key %d: %w", keyID, err)
	}
	if len(rows) == 1 && rows[0].SpendLimitMicros != nil && postgres {
		// Read again under the lock: the limits may have changed while it was waited for.
		if err := tx.Raw(q+" FOR UPDATE OF k", keyID).Scan(&rows).Error; err != nil {
			return nil, fmt.Errorf("lock key %d: %w", keyID, err)
		}
	}
	if len(rows) != 1 {
		return nil, fmt.Errorf("key %d: %w", keyID, ErrNoSuchKey)
	}
	r := rows[0]
	return &Guard{keyID: keyID, loc: accounts.LoadZone(r.TimeZone),
		limits: LimitsOf(models.APIKey{SpendLimitMicros: r.SpendLimitMicros, LimitPeriod: r.LimitPeriod, AllowedModels: r.AllowedModels})}, nil
}

// Check refuses, inside the create's transaction, a video of the model costing amount that the key
// may not create now: model_not_allowed_for_key for a model not in its list, key_spend_limit_reached
// when what it has reserved or been charged in the current period plus amount would pass its limit.
// Both messages say what the limit is; the second says when it resets.
func (g *Guard) Check(tx *gorm.DB, model string, amount money.Micros, now time.Time) error {
	if !g.limits.Allows(model) {
		return refusal.Field("model_not_allowed_for_key", "model",
			"This API key may create videos only with %s, not with %s. Use one of those models, or a key allowed to use %s (an account's API keys page sets each key's models).",
			joinAnd(g.limits.Models), model, model)
	}
	if g.limits.Spend == 0 {
		return nil
	}
	start, end := PeriodOf(g.limits.Period, now, g.loc)
	var spent int64
	if err := tx.Raw(spendSQL, g.keyID, start.UTC(), end.UTC()).Scan(&spent).Error; err != nil {
		return fmt.Errorf("read the spend of key %d: %w", g.keyID, err)
	}
	if money.Micros(spent)+amount <= g.limits.Spend {
		return nil
	}
	return spendRefusal(g.limits, money.Micros(spent), amount, end, now, g.loc)
}

// spendRefusal words key_spend_limit_reached. Retry-After is the time to the reset, when a video of
// this price fits again if it fits the limit at all.
func spendRefusal(l Limits, spent, amount money.Micros, reset, now time.Time, loc *time.Location) *refusal.Error {
	per, this := "per day", "today"
	if l.Period == PeriodMonth {
		per, this = "per month", "this month"
	}
	msg := fmt.Sprintf("This API key may spend %s %s; it has %s reserved or charged %s, and this video costs %s.",
		l.Spend.USD(), per, spent.USD(), this, amount.USD())
	if amount > l.Spend {
		msg += " The video alone costs more than the key's limit: raise the limit on the API keys page, or use another key."
	}
	if local := reset.In(loc); loc == time.UTC {
		msg += fmt.Sprintf(" The limit resets at %s (UTC, the account's time zone).", local.Format(time.RFC3339))
	} else {
		msg += fmt.Sprintf(" The limit resets at %s (%s, the account's time zone; %s in UTC).", local.Format(time.RFC3339), loc, reset.UTC().Format(time.RFC3339))
	}
	wait := math.Ceil(reset.Sub(now).Seconds())
	return &refusal.Error{Code: "key_spend_limit_reached", Message: msg, RetryAfter: int(max(wait, 1))}
}

// joinAnd lists names for a sentence: "a", "a and b", "a, b and c".
func joinAnd(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// Spending is what each of the account's keys has reserved or been charged in its current period: a
// limited key's own period (day or month), a key without a limit's calendar month. Periods are the
// account's time zone's; one query reads every key of the account.
type Spending struct {
	// Charged and Reserved are by key id (a key with nothing is absent): what completed videos were
	// charged (the Usage page's spend) and what is held for videos still running; a spend limit counts
	// both (docs/usage.md, "Spend").
	Charged, Reserved map[int64]money.Micros
	// Loc is the zone the periods are counted in.
	Loc *time.Location
	// DayEnd and MonthEnd are when the current day and month end, the resets of limits counted over them.
	DayEnd, MonthEnd time.Time
}

// SpendingOf reads the spending of the account's keys at now.
func SpendingOf(ctx context.Context, d *db.DB, accountID int64, keys []models.APIKey, now time.Time) (*Spending, error) {
	loc, err := accounts.Location(ctx, d, accountID)
	if err != nil {
		return nil, err
	}
	dayStart, dayEnd := PeriodOf(PeriodDay, now, loc)
	monthStart, monthEnd := PeriodOf(PeriodMonth, now, loc)
	var rows []struct {
		APIKeyID     int64
		BillingState string
		Day, Month   int64
	}
	// The day lies inside the month: one pass over the month's tasks sums both.
	err = d.R.WithContext(ctx).Raw(`SELECT api_key_id, billing_state,
			CAST(COALESCE(SUM(CASE WHEN created_at >= ? AND created_at < ? THEN amount_micros ELSE 0 END), 0) AS BIGINT) AS day,
			CAST(COALESCE(SUM(amount_micros), 0) AS BIGINT) AS month
		FROM tasks WHERE account_id = ? AND api_key_id IS NOT NULL AND created_at >= ? AND created_at < ?
			AND billing_state IN ('reserved', 'settled')
		GROUP BY api_key_id, billing_state`, dayStart.UTC(), dayEnd.UTC(), accountID, monthStart.UTC(), monthEnd.UTC()).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("read the spend of the keys of account %d: %w", accountID, err)
	}
	period := map[int64]string{}
	for _, k := range keys {
		period[k.ID] = LimitsOf(k).Period
	}
	s := &Spending{Charged: map[int64]money.Micros{}, Reserved: map[int64]money.Micros{},
		Loc: loc, DayEnd: dayEnd, MonthEnd: monthEnd}
	for _, r := range rows {
		amount := r.Month
		if period[r.APIKeyID] == PeriodDay {
			amount = r.Day
		}
		if amount == 0 {
			continue
		}
		if r.BillingState == "settled" {
			s.Charged[r.APIKeyID] += money.Micros(amount)
		} else {
			s.Reserved[r.APIKeyID] += money.Micros(amount)
		}
	}
	return s, nil
}
