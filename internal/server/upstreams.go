package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"videogen/internal/domain/catalog"
	"videogen/internal/domain/stills"
	"videogen/internal/domain/upstream"
	"videogen/internal/domain/upstream/httpapi"
	"videogen/internal/domain/upstream/providers"
	"videogen/internal/domain/upstream/sim"
	"videogen/internal/domain/upstream/status"
	"videogen/internal/infra/db"
	"videogen/internal/infra/runner"
	"videogen/internal/infra/storetext"
	"videogen/models"
)

// ReloadSignal is the control_signals row `videogen upstreams reload` bumps.
const ReloadSignal = "upstreams_reload"

// upstreamCredentials returns the credentials to start with: those of UPSTREAMS_FILE; or, deprecated,
// one OpenAI-style credential per UPSTREAM_API_KEYS key at UPSTREAM_BASE_URL; or, with neither, the
// built-in simulator, on a loopback port (served once Start runs) and spoken to over HTTP like any real provider.
func (s *Server) upstreamCredentials() ([]upstream.Credential, error) {
	cfg := s.Cfg
	switch {
	case cfg.UpstreamsFile != "":
		creds, err := providers.Load(cfg.UpstreamsFile, cfg.Production(), os.Getenv, cfg.UpstreamTimeout)
		if err != nil {
			return nil, fmt.Errorf("UPSTREAMS_FILE refused: %w", err)
		}
		s.Log.Info("upstream credentials loaded", "file", cfg.UpstreamsFile, "credentials", ids(creds))
		return creds, nil
	case cfg.UpstreamBaseURL != "":
		s.Log.Warn("UPSTREAM_BASE_URL and UPSTREAM_API_KEYS are deprecated: describe upstreams in UPSTREAMS_FILE (docs/upstreams.md); they record no upstream cost")
		provider := httpapi.New("upstream", cfg.UpstreamBaseURL, cfg.UpstreamTimeout)
		var creds []upstream.Credential
		for i, secret := range strings.Split(cfg.UpstreamAPIKeys, ",") {
			if secret = strings.TrimSpace(secret); secret == "" {
				continue
			}
			creds = append(creds, upstream.Credential{ID: upstream.CredentialID("upstream", secret), Name: fmt.Sprintf("upstream key %d", i+1),
				Kind: "openai", BaseURL: strings.TrimRight(cfg.UpstreamBaseURL, "/"), Secret: secret, MaxConcurrency: cfg.UpstreamConcurrency,
				Models: everyModel(), Provider: provider})
		}
		return creds, nil
	}
	return s.builtinSimulator()
}

// everyModel serves each public alias under its own name, rendering everything the API sells, with no
// price (costs are not recorded).
func everyModel() map[string]upstream.Route {
	m := make(map[string]upstream.Route, len(catalog.Models))
	for _, x := range catalog.Models {
		caps := providers.Everything(x.ID)
		caps.Seed = false // the openai adapter sends no seed
		m[x.ID] = upstream.Route{UpstreamModel: x.ID, Unpriced: true, Caps: caps}
	}
	return m
}

func (s *Server) builtinSimulator() ([]upstream.Credential, error) {
	cfg := s.Cfg
	secrets, err := simSecrets(cfg.SimDataDir, cfg.SimCredentials)
	if err != nil {
		return nil, err
	}
	sm, err := sim.New(sim.Config{Dir: cfg.SimDataDir, Duration: cfg.SimDuration, Concurrency: cfg.SimConcurrency, Output: cfg.SimOutput,
		// The simulator stands for a provider, which keeps its own time, not the instance's clock.
		Secrets: secrets, Log: s.Log.With("part", "simulator"), Now: time.Now})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("simulator listener: %w", err)
	}
	s.Sim = sm
	// Served from Start on: the worker is its only client, and it stops before the simulator does.
	s.parts.Add("upstream simulator", runner.HTTPServer(&http.Server{Handler: sm, ReadHeaderTimeout: 10 * time.Second}, ln, 5*time.Second))
	provider := httpapi.New("sim", "http://"+ln.Addr().String(), cfg.UpstreamTimeout)
	creds := make([]upstream.Credential, len(secrets))
	for i, secret := range secrets {
		// No base URL is recorded: the built-in simulator's port changes with every start.
		creds[i] = upstream.Credential{ID: upstream.CredentialID("sim", secret), Name: fmt.Sprintf("simulated credential %d", i+1),
			Kind: "sim", Secret: secret, MaxConcurrency: cfg.SimConcurrency, Models: everyModel(), Provider: provider}
	}
	s.Log.Info("built-in upstream simulator ready", "credentials", len(creds), "concurrency", cfg.SimConcurrency, "duration", cfg.SimDuration)
	return creds, nil
}

func ids(creds []upstream.Credential) []string {
	out := make([]string, len(creds))
	for i, c := range creds {
		out[i] = c.ID
	}
	return out
}

// ErrNoUpstreamsFile: a reload was asked for, but the pool does not come from a file.
var ErrNoUpstreamsFile = errors.New("nothing to reload: UPSTREAMS_FILE is not set")

// ReloadUpstreams re-reads UPSTREAMS_FILE and installs it whole, or not at all: new credentials take new
// tasks at once; removed ones take no new task but keep the tasks they hold; an invalid file is refused
// with the reason logged, and the running pool stays as it was. why says who asked (SIGHUP, a signal
// through the database).
func (s *Server) ReloadUpstreams(ctx context.Context, why string) error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	log := s.Log.With("part", "upstreams", "asked_by", why)
	if s.Cfg.UpstreamsFile == "" {
		log.Warn("upstream reload ignored", "err", ErrNoUpstreamsFile)
		return ErrNoUpstreamsFile
	}
	creds, err := providers.Load(s.Cfg.UpstreamsFile, s.Cfg.Production(), os.Getenv, s.Cfg.UpstreamTimeout)
	if err == nil {
		err = s.Pool.Check(ctx, creds)
	}
	if err != nil {
		log.Error("upstreams file refused; the running pool is unchanged", "file", s.Cfg.UpstreamsFile, "err", err)
		return fmt.Errorf("UPSTREAMS_FILE refused, the running pool is unchanged: %w", err)
	}
	now := s.Tasks.Now()
	if err := s.Pool.Sync(ctx, creds, true, now); err != nil {
		log.Error("record reloaded upstreams; the running pool is unchanged", "err", err)
		return err
	}
	added, removed := s.Pool.Replace(creds)
	if err := s.Pool.Health.Refresh(ctx, s.DB, ids(creds), 3*s.Cfg.UpstreamsWatch); err != nil {
		log.Warn("read upstream health after the reload", "err", err)
	}
	log.Info("upstreams reloaded", "file", s.Cfg.UpstreamsFile, "credentials", ids(creds), "added", added, "removed", removed)
	if s.Worker != nil {
		s.Worker.Notify() // new capacity may start waiting tasks now
	}
	return nil
}

// upstreamWatch runs on every instance: every UPSTREAMS_WATCH_INTERVAL it publishes this instance's
// view of each credential's health and reloads the pool when `videogen upstreams reload` has bumped
// the reload signal since it last looked (seen: the signal as it was when the instance was built).
func (s *Server) upstreamWatch(seen int64) runner.Every {
	var pruned time.Time
	return runner.Every{Interval: s.Cfg.UpstreamsWatch, Job: func(ctx context.Context) {
		// Health rows of instances gone for a day are forgotten (any instance may do it; it is idempotent).
		if now := s.Tasks.Now(); now.Sub(pruned) > 10*time.Minute {
			pruned = now
			if _, err := status.Stale(ctx, s.DB, now, 24*time.Hour); err != nil && ctx.Err() == nil {
				s.Log.Warn("forget old upstream health", "err", err)
			}
		}
		if err := s.Pool.Health.Publish(ctx, s.DB, ids(s.Pool.Configured()), 3*s.Cfg.UpstreamsWatch); err != nil && ctx.Err() == nil {
			s.Log.Warn("publish upstream health", "err", err)
		}
		seq, err := s.reloadSeq(ctx)
		if err != nil || seq == seen {
			return
		}
		seen = seq
		s.ackReload(ctx, seq, s.ReloadUpstreams(ctx, "videogen upstreams reload"))
	}}
}

// ackReload records this instance's answer to reload signal seq, for `videogen upstreams reload`.
func (s *Server) ackReload(ctx context.Context, seq int64, reloadErr error) {
	msg := ""
	if reloadErr != nil {
		msg, _ = storetext.Clip(reloadErr.Error(), 2000)
	}
	ack := models.UpstreamReloadAck{Instance: s.Cfg.WorkerID, Seq: seq, Error: msg, At: s.Tasks.Now()}
	err := s.DB.W.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "instance"}},
		DoUpdates: clause.AssignmentColumns([]string{"seq", "error", "at"}),
	}).Create(&ack).Error
	if err != nil && ctx.Err() == nil {
		s.Log.Warn("acknowledge the reload", "err", err)
	}
}

// BumpReload asks every running instance to re-read UPSTREAMS_FILE; it returns the signal's new seq,
// which each instance acknowledges in upstream_reload_acks.
func BumpReload(ctx context.Context, d *db.DB) (int64, error) {
	now := db.Now()
	var seq int64
	err := d.Tx(ctx, func(tx *gorm.DB) error {
		err := tx.Clauses(clause.OnConflict{
			Columns:   []clause.Column{{Name: "name"}},
			DoUpdates: clause.Assignments(map[string]any{"seq": gorm.Expr("control_signals.seq + 1"), "updated_at": now}),
		}).Create(&models.ControlSignal{Name: ReloadSignal, Seq: 1, UpdatedAt: now}).Error
		if err != nil {
			return err
		}
		return tx.Model(&models.ControlSignal{}).Where("name = ?", ReloadSignal).Select("seq").Scan(&seq).Error
	})
	if err != nil {
		return 0, fmt.Errorf("signal the reload: %w", err)
	}
	return seq, nil
}

func (s *Server) reloadSeq(ctx context.Context) (int64, error) {
	var rows []models.ControlSignal
	if err := s.DB.R.WithContext(ctx).Where("name = ?", ReloadSignal).Find(&rows).Error; err != nil {
		return 0, fmt.Errorf("read the reload signal: %w", err)
	}
	if len(rows) == 0 {
		return 0, nil
	}
	return rows[0].Seq, nil
}

// findFFmpeg finds the program that makes stills for providers that serve none, and says at start when
// there is none, since those videos then have no thumbnail or spritesheet.
func findFFmpeg(name string, log *slog.Logger) stills.FFmpeg {
	f, ok := stills.Find(name)
	if !ok && name != "off" {
		log.Warn("ffmpeg not found (FFMPEG_PATH): videos from providers that serve no stills (ark) get no thumbnail or spritesheet", "ffmpeg", name)
	}
	return f
}
