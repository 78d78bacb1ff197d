package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"sort"
	"strings"
)

// libpqParams are the URL parameters libpq (and so pg_dump and pg_restore) understands. pgx takes any
// other parameter as a run-time setting, libpq refuses the whole URL: such a URL is refused here with
// the parameter named, rather than by pg_dump with a message about the URL.
var libpqParams = map[string]bool{
	"host": true, "hostaddr": true, "port": true, "dbname": true, "user": true, "passfile": true,
	"channel_binding": true, "connect_timeout": true, "client_encoding": true, "options": true,
	"application_name": true, "fallback_application_name": true, "keepalives": true, "keepalives_idle": true,
	"keepalives_interval": true, "keepalives_count": true, "tcp_user_timeout": true, "gssencmode": true,
	"sslmode": true, "requiressl": true, "sslcompression": true, "sslcert": true, "sslkey": true,
	"sslpassword": true, "sslrootcert": true, "sslcrl": true, "sslcrldir": true, "sslsni": true,
	"requirepeer": true, "ssl_min_protocol_version": true, "ssl_max_protocol_version": true,
	"krbsrvname": true, "gsslib": true, "service": true, "target_session_attrs": true, "load_balance_hosts": true,
}

// pgTarget is a PostgreSQL URL made fit for the client programs: the password travels in PGPASSWORD,
// never on a command line (where ps shows it) or in a message.
type pgTarget struct {
	url      string // without the password
	password string
	shown    string // for messages: the URL with the password masked
}

func newPGTarget(raw string) (pgTarget, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's error quotes the URL, password and all.
		return pgTarget{}, errors.New("DATABASE_URL is not a valid postgres:// URL")
	}
	t := pgTarget{shown: u.Redacted()}
	var unknown []string
	for k := range u.Query() {
		if k == "password" {
			return pgTarget{}, fmt.Errorf("%s: give the password in the URL's user part or in PGPASSWORD, not as ?password=", t.shown)
		}
		if !libpqParams[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return pgTarget{}, fmt.Errorf("%s: pg_dump and pg_restore do not take the parameter(s) %s; "+
			"back up a whole database by its plain URL", t.shown, strings.Join(unknown, ", "))
	}
	if u.User != nil {
		if p, ok := u.User.Password(); ok {
			t.password = p
			u.User = url.User(u.User.Username())
		}
	}
	t.url = u.String()
	return t, nil
}

// pgTool finds a PostgreSQL client program on PATH, or says how to get one.
func pgTool(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s is not on PATH: install the PostgreSQL client programs of the server's major "+
			"version or newer (Debian: apt-get install postgresql-client-15)", name)
	}
	return p, nil
}

// runPGTool runs a PostgreSQL client program against t, with its stderr kept for the error.
func runPGTool(ctx context.Context, t pgTarget, name string, args ...string) error {
	path, err := pgTool(name)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = os.Environ()
	if t.password != "" {
		cmd.Env = append(cmd.Env, "PGPASSWORD="+t.password)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if t.password != "" {
			msg = strings.ReplaceAll(msg, t.password, "xxxxx")
		}
		return fmt.Errorf("%s on %s: %w: %s", name, t.shown, err, msg)
	}
	return nil
}
