package web

import (
	"fmt"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
)

// WebhookSendsPerMinute is how many test events and resends one account may send a minute.
const WebhookSendsPerMinute = 10

// WebhookSendWait reports how long the account must wait before it may send a test event or resend a
// delivery (0: it may now), and counts this one when it may. Without a limiter every send may go.
func (h *Base) WebhookSendWait(c *fiber.Ctx, accountID int64) (time.Duration, error) {
	if h.WebhookSends == nil {
		return 0, nil
	}
	ok, wait, err := h.WebhookSends.Allow(c.UserContext(), strconv.FormatInt(accountID, 10))
	if err != nil {
		return 0, fmt.Errorf("limit webhook sends: %w", err)
	}
	if ok {
		return 0, nil
	}
	return max(wait, time.Second), nil
}

// WebhookSendsRefused is what an account past its sends is told, with the wait in words.
func WebhookSendsRefused(wait time.Duration) string {
	return fmt.Sprintf("This account has sent %d test events and resends in the last minute, the most it may. "+
		"Send the next one in %s.", WebhookSendsPerMinute, SecondsInWords(wait))
}

// SecondsInWords says a short wait the way a person would: "1 second", "40 seconds", "2 minutes".
func SecondsInWords(d time.Duration) string {
	s := int((d + time.Second - 1) / time.Second)
	switch {
	case s <= 1:
		return "1 second"
	case s < 120:
		return strconv.Itoa(s) + " seconds"
	default:
		return strconv.Itoa((s+59)/60) + " minutes"
	}
}
