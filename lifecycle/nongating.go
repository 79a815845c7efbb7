package lifecycle

import (
	"maps"
	"net/http"
	"path"

	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/fxkube/fxkube/internal/contract"
)

// readyzHandler serves /readyz: its checks, and those the non-gating
// lists return at each request. healthz cannot say why a passing check
// passes, so a non-gating check that fails is listed as excluded, which
// healthz's verbose output renders "[+]<name> excluded: ok": it does not
// count. At /readyz/<name> it fails, with its cause, as any check does.
type readyzHandler struct {
	gating    *healthz.Handler
	nonGating []contract.NonGatingChecks
}

func (h *readyzHandler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if len(h.nonGating) == 0 {
		h.gating.ServeHTTP(w, req)
		return
	}
	aggregate := path.Clean("/"+req.URL.Path) == "/"
	checks := maps.Clone(h.gating.Checks)
	var failing []string
	for _, list := range h.nonGating {
		for name, check := range list() {
			if _, taken := checks[name]; taken {
				continue // the app's own checks keep their names
			}
			if !aggregate {
				checks[name] = check
				continue
			}
			checks[name] = healthz.Ping
			if check(req) != nil {
				failing = append(failing, name)
			}
		}
	}
	if len(failing) > 0 {
		req = excluding(req, failing)
	}
	(&healthz.Handler{Checks: checks}).ServeHTTP(w, req)
}

// excluding returns req with names added to the checks its query
// excludes.
func excluding(req *http.Request, names []string) *http.Request {
	u := *req.URL
	q := u.Query()
	q["exclude"] = append(q["exclude"], names...)
	u.RawQuery = q.Encode()
	out := req.Clone(req.Context())
	out.URL = &u
	return out
}
