package auth

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"videogen/internal/infra/ratelimit"
	"videogen/internal/infra/seal"
	"videogen/models"
)

// Guessing is limited so that a stranger cannot lock the owner out (docs/decisions.md, "Sign-in
// throttles"). Every attempt counts against its client and the address it names together (a pair), and
// every client against its own total; on top, the attempts of clients the account does not know share a
// ceiling per address, which bounds guessing spread over many networks. A client the account knows — a
// browser holding its device cookie, or a network one of its sessions started from lately — is held only
// by its own limits: however many strangers guess, the owner still signs in from their own browser or
// network. A device cookie is bound to the password it was given under (a new password voids it) and
// counted on its own (one cookie copied to many networks gets one browser's tries).

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

// DeviceTTL is how long a device cookie vouches for its browser; deviceRefresh is the age after which a
// sign-in gives it a new one, so a browser in use stays known.
const (
	DeviceTTL     = 180 * 24 * time.Hour
	deviceRefresh = 30 * 24 * time.Hour
)

// knownNetworkWindow is how recently a session must have started from a network for it to count as the
// account's own.
const knownNetworkWindow = 30 * 24 * time.Hour

// device is a device cookie as read: whose, what it proved, when, under which password.
type device struct {
	userID int64
	level  string
	issued time.Time
	epoch  string // passwordEpoch of the user's password when it was given
	sig    string // its signature: the cookie's own name in the per-device limiter
}

// DeviceCookie is the device cookie a browser should hold once it has proved to be userID — by the
// password or an e-mailed link, or, with secondFactor, by a staff member's code as well — given the one
// it holds (held, "" when none). It keeps held while that still vouches as much and is fresh, else makes
// a new one (at the higher of the two levels); changed says whether to set it. The cookie signs nobody
// in: it only lets its browser past the ceiling that strangers share, and a new password voids it.
func (s *Service) DeviceCookie(ctx context.Context, held string, userID int64, secondFactor bool) (token string, changed bool, err error) {
	hash, err := s.passwordHash(ctx, userID, "")
	if err != nil {
		return "", false, err
	}
	level := devicePassword
	if secondFactor {
		level = deviceSecondFactor
	}
	if d, ok := s.deviceOf(held); ok && d.userID == userID && d.epoch == s.passwordEpoch(hash) {
		if d.level == deviceSecondFactor {
			level = deviceSecondFactor
		}
		if d.level == level && s.now().Sub(d.issued) < deviceRefresh {
			return held, false, nil
		}
	}
	mac, err := seal.NewMAC(s.Secrets, seal.DeviceCookie)
	if err != nil {
		return "", false, fmt.Errorf("sign a device cookie: %w", err)
	}
	msg := strconv.FormatInt(userID, 10) + "." + level + "." + strconv.FormatInt(s.now().Unix(), 10) + "." + s.passwordEpoch(hash)
	return msg + "." + mac.Sum([]byte(msg)), true, nil
}

// passwordEpoch names a password without revealing anything of it: a device cookie carries it, so that
// a new password (a reset after a break-in) voids every cookie given before.
func (s *Service) passwordEpoch(hash string) string {
	mac, err := seal.NewMAC(s.Secrets, seal.DeviceCookie)
	if err != nil {
		return ""
	}
	return mac.Sum([]byte("password epoch\x00" + hash))[:16]
}

// passwordHash reads a user's password hash ("" when they have none yet) by id and, when email is set,
// address; errNoUser when no user matches.
func (s *Service) passwordHash(ctx context.Context, userID int64, email string) (string, error) {
	q := s.DB.R.WithContext(ctx).Model(&models.User{}).Where("id = ?", userID)
	if email != "" {
		q = q.Where("email = ?", email)
	}
	var hashes []string
	if err := q.Limit(1).Pluck("password_hash", &hashes).Error; err != nil {
		return "", fmt.Errorf("read the password of user %d: %w", userID, err)
	}
	if len(hashes) == 0 {
		return "", errNoUser
	}
	return hashes[0], nil
}

var errNoUser = errors.New("no such user")

// deviceOf reads a device cookie, if it is one of ours and not expired.
func (s *Service) deviceOf(token string) (device, bool) {
	if token == "" || len(token) > 200 {
		return device{}, false
	}
	i := strings.LastIndexByte(token, '.')
	if i < 0 {
		return device{}, false
	}
	msg, sig := token[:i], token[i+1:]
	mac, err := seal.NewMAC(s.Secrets, seal.DeviceCookie)
	if err != nil || !mac.Verify([]byte(msg), sig) {
		return device{}, false
	}
	parts := strings.Split(msg, ".")
	if len(parts) != 4 {
		return device{}, false
	}
	id, err1 := strconv.ParseInt(parts[0], 10, 64)
	issued, err2 := strconv.ParseInt(parts[2], 10, 64)
	d := device{userID: id, level: parts[1], issued: time.Unix(issued, 0), epoch: parts[3], sig: sig}
	if err1 != nil || err2 != nil || s.now().Sub(d.issued) > DeviceTTL {
		return device{}, false
	}
	return d, true
}

// knownDevice reports whether a device cookie vouches for its browser as userID (of address email, when
// set) at level (any level when ""): signed by us, fresh enough, of that user, under their current
// password. Each cookie that does is held by a limiter of its own too (perDevice, one per cookie): a
// cookie copied to many networks gets no more tries than one browser.
func (s *Service) knownDevice(ctx context.Context, token string, userID int64, email, level string, perDevice ratelimit.Limiter) (bool, error) {
	d, ok := s.deviceOf(token)
	if !ok || (userID != 0 && d.userID != userID) || (level != "" && d.level != level) {
		return false, nil
	}
	hash, err := s.passwordHash(ctx, d.userID, email)
	if errors.Is(err, errNoUser) {
		return false, nil
	}
	if err != nil || d.epoch != s.passwordEpoch(hash) {
		return false, err
	}
	if err := allowScoped(ctx, perDevice, "device "+d.sig, "address"); err != nil {
		return false, err
	}
	return true, nil
}

// knownForSignIn reports whether the client is one the account of email knows: its browser holds a
// device cookie of that user, or a session of that user started from its network lately. Called only
// once the strangers' ceiling is reached, so the common sign-in pays nothing for it; the network's
// query is the same whether or not the address has an account.
func (s *Service) knownForSignIn(ctx context.Context, email string, c Client) (bool, error) {
	if ok, err := s.knownDevice(ctx, c.Device, 0, email, "", s.Throttle.SignInPerPair); ok || err != nil {
		return ok, err
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
	if ok, err := s.knownDevice(ctx, c.Device, userID, "", deviceSecondFactor, s.Throttle.SecondFactorPerPair); ok || err != nil {
		return ok, err
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
