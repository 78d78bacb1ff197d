package auth

import (
	_ "embed"
	"strings"
	"unicode/utf8"

	"videogen/internal/domain/accounts"
)

//go:embed common_passwords.txt
var commonList string

var common = func() map[string]bool {
	m := map[string]bool{}
	for _, p := range strings.Fields(commonList) {
		m[p] = true
	}
	return m
}()

// MaxPasswordLength bounds the work one sign-in can cause (argon2 hashes every byte).
const MaxPasswordLength = 200

// CheckPassword says what is wrong with a new password for the user with this e-mail, or "" when it is
// acceptable: long enough, not one of the passwords attackers try first, not the e-mail itself.
func CheckPassword(password, email string) string {
	n := utf8.RuneCountInString(password)
	switch {
	case n < accounts.MinPasswordLength:
		return "Use at least 10 characters; a few unrelated words make a strong, memorable password."
	case len(password) > MaxPasswordLength:
		return "Use at most 200 characters."
	case common[strings.ToLower(password)]:
		return "This password is among the most common ones attackers try first. Choose another."
	case strings.Count(password, string([]rune(password)[0])) == n:
		return "A single repeated character is too easy to guess. Choose another."
	}
	local, _, _ := strings.Cut(strings.ToLower(email), "@")
	if len(local) >= 4 && strings.Contains(strings.ToLower(password), local) {
		return "Do not use your e-mail address in your password."
	}
	return ""
}
