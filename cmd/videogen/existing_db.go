package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"videogen/internal/infra/config"
	"videogen/internal/infra/db"
)

// errNoDatabase says that the SQLite database the settings name is not there.
var errNoDatabase = errors.New("no database")

// checkDatabaseExists refuses to go on when the SQLite database the settings name does not exist. The
// operator commands work on a deployment's database: run from another folder, DATA_DIR's default
// ("data", relative to the current folder) names a file that is not there, and opening it would create
// an empty database that answers "no user with this e-mail" for an account that exists. The message
// names the file looked for and how to point the command at the right one. PostgreSQL databases are
// never created by opening them, so there is nothing to check.
func checkDatabaseExists(cfg *config.Config) error {
	if cfg.IsPostgres() {
		return nil
	}
	path := db.SQLitePath(cfg.DatabaseURL)
	_, err := os.Stat(path)
	if err == nil {
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read the database %s: %w", path, err)
	}
	return fmt.Errorf("%w at %s: this command works on an existing database and does not create one. "+
		"Run it in the folder the server runs in, or point it at the server's database with DATA_DIR "+
		"(the folder holding videogen.db, now %q) or DATABASE_URL (a SQLite file or a postgres:// URL)", errNoDatabase, absPath(path), cfg.DataDir)
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// invoked is this program as the user typed it ("./bin/videogen", "videogen", "/usr/local/bin/vg"),
// for the commands a hint prints: pasted back, it runs the same binary.
func invoked() string {
	if len(os.Args) == 0 || os.Args[0] == "" {
		return "videogen"
	}
	return shellQuote(os.Args[0])
}

// hint returns a command line of this program for a message: invoked() and the arguments.
func hint(args ...string) string {
	return strings.Join(append([]string{invoked()}, args...), " ")
}
