package fxcluster

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/fxkube/fxkube/internal/contract"
)

// readiness lists each member on /readyz as the check
// "cluster-<name>". It passes while the member is ready; otherwise it
// fails with the member's state and cause at /readyz/cluster-<name>, and
// /readyz?verbose lists it as excluded. No member fails the app's own
// readiness: a member that fails gates only itself.
func readiness(f *Fleet) contract.NonGatingChecks {
	if len(f.opts.Providers) == 0 {
		return nil
	}
	return func() map[string]healthz.Checker {
		infos := f.Clusters()
		checks := make(map[string]healthz.Checker, len(infos))
		for _, info := range infos {
			checks[CheckName(info.Name)] = func(*http.Request) error { return notReady(info) }
		}
		return checks
	}
}

// CheckName is the name of the /readyz check of the member name:
// "cluster-<name>".
func CheckName(name ClusterName) string { return "cluster-" + string(name) }

// notReady returns why the member of info is not ready, or nil.
func notReady(info ClusterInfo) error {
	if info.State == Ready {
		return nil
	}
	what := fmt.Sprintf("cluster %q %s since %s, attempt %d", info.Name, info.State, info.Since.UTC().Format(time.RFC3339), info.Attempts)
	if info.Err != nil {
		return fmt.Errorf("%s: %w", what, info.Err)
	}
	return errors.New(what)
}
