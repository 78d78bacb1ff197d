package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"videogen/internal/infra/config"
	"videogen/internal/infra/seal"
)

// A backup's manifest is signed: manifest.sig holds "hmac-sha256:" and the hex HMAC-SHA-256 of
// manifest.json's exact bytes, under the key seal derives from the first APP_SECRET value for
// seal.BackupManifest. The manifest holds the SHA-256 of the database copy and of every stored file, and
// restore checks each against the bytes it copies, so the signature covers the whole backup. The exact
// bytes are signed, not a re-encoding of what was read: a later binary that adds a field to the manifest
// still verifies the backups of an earlier one (docs/backups.md, "The signature").
const (
	signatureName   = "manifest.sig"
	signatureScheme = "hmac-sha256:"
)

// signManifest is the content of manifest.sig for the manifest's bytes b.
func signManifest(secrets []string, b []byte) (string, error) {
	mac, err := seal.NewMAC(secrets, seal.BackupManifest)
	if err != nil {
		return "", fmt.Errorf("sign the manifest: %w", err)
	}
	return signatureScheme + mac.Sum(b) + "\n", nil
}

// ownSecrets are the secrets a restore checks a signature with: the restoring installation's own, never
// one read from the backup (a development backup carries its secret: a key that travels with what it
// signs vouches for nothing to whoever holds both). APP_SECRET, every value of it (a rotation keeps the
// old one listed); without it, DATA_DIR/app_secret when this installation has one already (restoring
// over itself with --force). where names them for messages.
func ownSecrets(cfg *config.Config, dataDir string) (secrets []string, where string, err error) {
	if cfg.AppSecret != "" {
		return cfg.Secrets(), "APP_SECRET", nil
	}
	// Read, not config.EnsureSecret: that would create a secret, and a new one verifies nothing.
	b, err := os.ReadFile(filepath.Join(dataDir, secretName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read this installation's secret: %w", err)
	}
	if s := strings.TrimSpace(string(b)); s != "" {
		return []string{s}, "DATA_DIR/" + secretName, nil
	}
	return nil, "", nil
}

// errUnsigned is why a backup's signature does not vouch for it; its message says what to do.
type errUnsigned struct {
	msg  string // what happened and what to do, for the refusal
	what string // the same in a few words, for the warning --allow-unsigned prints
}

func (e *errUnsigned) Error() string { return e.msg }

// verifyManifest checks manifest.sig in dir against the manifest's bytes b with secrets; nil when it
// verifies under one of them, an *errUnsigned when it is missing or does not verify.
func verifyManifest(dir string, b []byte, m *manifest, secrets []string, where string) error {
	sigPath := filepath.Join(dir, signatureName)
	raw, err := os.ReadFile(sigPath)
	if errors.Is(err, fs.ErrNotExist) {
		return &errUnsigned{what: "is missing",
			msg: fmt.Sprintf("%s has no %s: the backup was made before videogen signed its backups, or its signature was removed, "+
				"so nothing shows it is what videogen backup wrote. Nothing was restored. If you know where this backup has been, "+
				"restore it with --allow-unsigned; take a new backup with this binary to have a signed one", dir, signatureName)}
	}
	if err != nil {
		return fmt.Errorf("read the backup's signature: %w", err)
	}
	// A development backup carries the secret that signed it (app_secret): say so, the advice differs.
	devBackup := slices.ContainsFunc(m.Files, func(f backupFile) bool { return f.Path == secretName })
	if len(secrets) == 0 {
		msg := "this installation has no secret to check the backup's signature with (APP_SECRET is not set and DATA_DIR has no " +
			secretName + "). Nothing was restored. Set APP_SECRET to the secret of the installation that made the backup " +
			"(kept with your other secrets, not in the backup) and run again"
		if devBackup {
			msg += "; this backup was made in development, where the secret is DATA_DIR/" + secretName + " and travels in the " +
				"backup, so its signature vouches for nothing to whoever holds the backup: if you know where it has been, " +
				"restore it with --allow-unsigned"
		}
		return &errUnsigned{what: "cannot be checked (this installation has no secret)", msg: msg}
	}
	mac, err := seal.NewMAC(secrets, seal.BackupManifest)
	if err != nil {
		return fmt.Errorf("check the backup's signature: %w", err)
	}
	sig, ok := strings.CutPrefix(strings.TrimSpace(string(raw)), signatureScheme)
	if !ok || !mac.Verify(b, sig) {
		return &errUnsigned{what: "does not verify",
			msg: fmt.Sprintf("%s does not verify with this installation's secret (%s): the backup was changed after it was made, "+
				"or it was made by an installation with another secret. Nothing was restored. If the secret was rotated since, "+
				"list the old one after the new (APP_SECRET=new,old); if you know where this backup has been, --allow-unsigned "+
				"restores it anyway", sigPath, where)}
	}
	return nil
}
