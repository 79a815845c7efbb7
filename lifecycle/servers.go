package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// servers are the probe and metrics HTTP servers.
type servers struct {
	log  *zap.Logger
	list []*http.Server
	wg   sync.WaitGroup
}

// serve starts the probe and metrics servers. Listening happens before serve
// returns, so a taken port fails start at once.
func serve(cfg Config, readiness func() error, checks []Check, log *zap.Logger) (*servers, error) {
	s := &servers{log: log}
	probes := http.NewServeMux()
	probes.Handle("/healthz", probe(withChecks(func() error { return nil }, checks, false)))
	probes.Handle("/readyz", probe(withChecks(readiness, checks, true)))
	metricsMux := http.NewServeMux()
	metricsMux.Handle("/metrics", promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))

	for _, srv := range []struct {
		name, addr string
		handler    http.Handler
	}{
		{"health probes", cfg.HealthProbeBindAddress, probes},
		{"metrics", cfg.MetricsBindAddress, metricsMux},
	} {
		if srv.addr == "0" {
			continue
		}
		ln, err := net.Listen("tcp", srv.addr)
		if err != nil {
			s.close(context.Background())
			return nil, fmt.Errorf("serve %s on %s: %w", srv.name, srv.addr, err)
		}
		hs := &http.Server{Handler: srv.handler, ReadHeaderTimeout: 10 * time.Second}
		s.list = append(s.list, hs)
		s.wg.Go(func() {
			if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("server failed", zap.String("server", srv.name), zap.Error(err))
			}
		})
		log.Info("serving", zap.String("server", srv.name), zap.Stringer("address", ln.Addr()))
	}
	return s, nil
}

// withChecks returns a check that passes when base and every check of the
// readiness kind given do, naming the first that fails.
func withChecks(base func() error, checks []Check, readiness bool) func(*http.Request) error {
	var mine []Check
	for _, c := range checks {
		if c.Readiness == readiness {
			mine = append(mine, c)
		}
	}
	return func(req *http.Request) error {
		if err := base(); err != nil {
			return err
		}
		for _, c := range mine {
			if err := c.Checker(req); err != nil {
				return fmt.Errorf("check %q failed: %w", c.Name, err)
			}
		}
		return nil
	}
}

// probe answers 200 "ok" when check passes, else 503 with the reason, as
// Kubernetes probes expect.
func probe(check func(*http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if err := check(req); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintln(w, err)
			return
		}
		_, _ = fmt.Fprintln(w, "ok")
	})
}

func (s *servers) close(ctx context.Context) {
	if s == nil {
		return
	}
	for _, hs := range s.list {
		if err := hs.Shutdown(ctx); err != nil {
			s.log.Warn("server did not close cleanly", zap.Error(err))
		}
	}
	s.wg.Wait()
}
