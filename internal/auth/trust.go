package auth

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"videogen/internal/seal"
	"videogen/models"
)

// Guessing is limited so that a stranger cannot lock the owner out (docs/decisions.md, "Sign-in
// throttles"). Every attempt counts against its client and the address it names together (a pair), and
// every client against its own total; on top, the attempts of clients the account does not know share a
// ceiling per address, which bounds guessing spread over many networks. A client the account knows — a
// browser holding its device cookie, or a network one of its sessions started from lately — is held only
// by its own limits: however many strangers guess, the owner still signs in from their own browser or
// network.

// Client is who is signing in: their address as the trusted proxy reports it, and the device cookie their
// browser sent ("" when none).
type Client struct {
	IP     string
	Device string
}

// Device cookie levels: what the browser holding it proved.
const (
	devicePassword     = "pw"  // signed in with the password (or a link that proves the mailbox)
	deviceSecondFactor = "2fa" // passed a staff member's second factor as well
)

// DeviceTTL is how long a device cookie vouches for its browser.
const DeviceTTL = 180 * 24 * time.Hour

// knownNetworkWindow is how recently a session must have started from a network for it to count as the
// account's own.
const knownNetworkWindow = 30 * 24 * time.Hour

// DeviceToken is the device cookie for a browser that just signed in as userID (the password, a
// verification link from its sign-up browser, or a reset link). It is no credential: it signs nobody in,
// it only exempts its browser from the ceiling shared by strangers.
func (s *Service) DeviceToken(userID int64) (string, error) {
	return s.deviceToken(userID, devicePassword)
}

// SecondFactorDeviceToken is the device cookie for a browser whose session just passed the second factor.
func (s *Service) SecondFactorDeviceToken(userID int64) (string, error) {
	return s.deviceToken(userID, deviceSecondFactor)
}

func (s *Service) deviceToken(userID int64, level string) (string, error) {
	mac, err := seal.NewMAC(s.Secrets, seal.DeviceCookie)
	if err != nil {
		return "", fmt.Errorf("sign a device cookie: %w", err)
	}
	msg := strconv.FormatInt(userID, 10) + "." + level + "." + strconv.FormatInt(s.now().Unix(), 10)
	return msg + "." + mac.Sum([]byte(msg)), nil
}

// HoldsDevice reports whether token is a live device cookie of userID (of either level): a sign-in
// keeps such a cookie rather than replace a second factor's with a password's.
func (s *Service) HoldsDevice(token string, userID int64) bool {
	id, _, ok := s.deviceOf(token)
	return ok && id == userID
}

// deviceOf reads a device cookie: its user and level, if it is one of ours and not expired.
func (s *Service) deviceOf(token string) (userID int64, level string, ok bool) {
	if token == "" || len(token) > 200 {
		return 0, "", false
	}
	i := strings.LastIndexByte(token, '.')
	if i < 0 {
		return 0, "", false
	}
	msg, sum := token[:i], token[i+1:]
	mac, err := seal.NewMAC(s.Secrets, seal.DeviceCookie)
	if err != nil || !mac.Verify([]byte(msg), sum) {
		return 0, "", false
	}
	parts := strings.Split(msg, ".")
	if len(parts) != 3 {
		return 0, "", false
	}
	id, err1 := strconv.ParseInt(parts[0], 10, 64)
	issued, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || s.now().Sub(time.Unix(issued, 0)) > DeviceTTL {
		return 0, "", false
	}
	return id, parts[1], true
}

// knownForSignIn reports whether the client is one the account of email knows: its browser holds a
// device cookie of that user, or a session of that user started from its network lately. Called only
// once the strangers' ceiling is reached, so the common sign-in pays nothing for it; the query is the
// same whether or not the address has an account.
func (s *Service) knownForSignIn(ctx context.Context, email string, c Client) (bool, error) {
	if id, _, ok := s.deviceOf(c.Device); ok {
		var n int64
		if err := s.DB.R.WithContext(ctx).Model(&models.User{}).Where("id = ? AND email = ?", id, email).Count(&n).Error; err != nil {
			return false, fmt.Errorf("check the device cookie of %s: %w", email, err)
		}
		if n > 0 {
			return true, nil
		}
	}
	if c.IP == "" {
		return false, nil
	}
	var ids []int64
	err := s.DB.R.WithContext(ctx).Model(&models.Session{}).Joins("JOIN users ON users.id = sessions.user_id").
		Where("users.email = ? AND sessions.ip = ? AND sessions.created_at > ?", email, c.IP, s.now().Add(-knownNetworkWindow)).
		Limit(1).Pluck("sessions.id", &ids).Error
	if err != nil {
		return false, fmt.Errorf("look for sessions of %s from %s: %w", email, c.IP, err)
	}
	return len(ids) > 0, nil
}

// knownForSecondFactor is knownForSignIn for a staff member's code: a device cookie given when this
// browser passed the second factor, or a session of theirs from this network that passed it lately.
func (s *Service) knownForSecondFactor(ctx context.Context, userID int64, c Client) (bool, error) {
	if id, level, ok := s.deviceOf(c.Device); ok && id == userID && level == deviceSecondFactor {
		return true, nil
	}
	if c.IP == "" {
		return false, nil
	}
	var ids []int64
	err := s.DB.R.WithContext(ctx).Model(&models.Session{}).
		Where("user_id = ? AND ip = ? AND second_factor_at > ?", userID, c.IP, s.now().Add(-knownNetworkWindow)).
		Limit(1).Pluck("id", &ids).Error
	if err != nil {
		return false, fmt.Errorf("look for sessions of user %d past the second factor from %s: %w", userID, c.IP, err)
	}
	return len(ids) > 0, nil
}
