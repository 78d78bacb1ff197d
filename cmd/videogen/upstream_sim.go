package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"videogen/internal/domain/upstream/sim"
	"videogen/internal/infra/config"
)

// simCmd runs the upstream simulator on its own, so that a platform can be pointed at it as at an
// external provider (docs/upstreams.md#simulator).
func simCmd() *cobra.Command {
	var addr, keys, protocol, dir string
	c := &cobra.Command{
		Use:   "upstream-sim",
		Short: "run the upstream simulator standalone, speaking the platform's own, OpenAI's, Ark's or the Gemini API's protocol (SIM_DURATION, SIM_CONCURRENCY, SIM_OUTPUT, SIM_DATA_DIR apply)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(nil)
			if err != nil {
				return err
			}
			var secrets []string
			for _, k := range strings.Split(keys, ",") {
				if k = strings.TrimSpace(k); k != "" {
					secrets = append(secrets, k)
				}
			}
			if len(secrets) == 0 {
				return errors.New("--keys is required: the credentials the simulator accepts, comma-separated")
			}
			if dir == "" {
				dir = cfg.SimDataDir
			}
			log := newLogger(cfg)
			s, err := sim.New(sim.Config{Dir: dir, Duration: cfg.SimDuration, Concurrency: cfg.SimConcurrency, Secrets: secrets,
				Protocol: protocol, Output: cfg.SimOutput, Log: log, Now: time.Now})
			if err != nil {
				return err
			}
			// Listen before serving, so that with port 0 the address printed is the one bound.
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("listen on %s: %w", addr, err)
			}
			srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			stopped := make(chan error, 1)
			go func() {
				<-ctx.Done()
				sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				stopped <- srv.Shutdown(sctx)
			}()
			url := "http://" + ln.Addr().String()
			base := url // what an upstreams file names as this simulator's base_url
			if protocol == sim.ProtocolArk {
				base += "/api/v3"
			}
			log.Info("upstream simulator serving", "protocol", protocol, "base_url", base, "credentials", len(secrets), "dir", dir)
			fmt.Fprintln(cmd.OutOrStdout(), "listening on "+url)
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			if err := <-stopped; err != nil {
				return fmt.Errorf("stop the simulator: %w", err)
			}
			log.Info("upstream simulator stopped")
			return nil
		},
	}
	c.Flags().StringVar(&protocol, "protocol", sim.ProtocolVideogen,
		"wire protocol: videogen (the platform's own /v1/videos, for kind sim), openai (OpenAI's Videos API as its spec has it, for kind openai), ark (/api/v3/contents/generations/tasks) or gemini (/v1beta/models/{model}:predictLongRunning, keys in x-goog-api-key)")
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:9090", "listen address (port 0: any free port, printed on stdout)")
	c.Flags().StringVar(&keys, "keys", os.Getenv("UPSTREAM_API_KEYS"), "accepted credentials, comma-separated (default UPSTREAM_API_KEYS)")
	c.Flags().StringVar(&dir, "dir", "", "where the simulator keeps its tasks (default SIM_DATA_DIR)")
	return c
}
