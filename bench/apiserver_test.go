package bench

import (
	"maps"
	"net/http"
	"strings"
	"sync"
)

// workloadResources are the resources the shared and hosting workloads'
// stores list and watch.
var workloadResources = []string{"configmaps", "secrets", "deployments"}

// What a system's requests are for, as requestClass sorts them.
const (
	sentDiscovery     = "discovery"       // GET /api, /apis and their group versions
	sentAccessReview  = "access-review"   // SelfSubjectAccessReview
	sentIdentityCheck = "identity-review" // SelfSubjectReview
	sentWatch         = "watch"           // a watch, with or without its initial list
	sentRead          = "read"            // any other GET: a list, here
	sentOther         = "other"
)

// requestCounter counts the requests a system sends, by requestClass: the
// client's side of what it asks the API server, which the server's own
// metrics do not tell apart by sender.
type requestCounter struct {
	// class sorts the requests; requestClass when nil.
	class func(*http.Request) string

	mu   sync.Mutex
	sent map[string]int
}

// wrap is a rest.Config transport wrapper that counts each request.
func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		classify := c.class
		if classify == nil {
			classify = requestClass
		}
		class := classify(req)
		c.mu.Lock()
		if c.sent == nil {
			c.sent = make(map[string]int)
		}
		c.sent[class]++
		c.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

func (c *requestCounter) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.sent)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// requestClass says what a request to the API server is for.
func requestClass(req *http.Request) string {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	last := parts[len(parts)-1]
	switch {
	case req.Method == http.MethodPost && last == "selfsubjectaccessreviews":
		return sentAccessReview
	case req.Method == http.MethodPost && last == "selfsubjectreviews":
		return sentIdentityCheck
	case req.Method != http.MethodGet:
		return sentOther
	case parts[0] == "api" && len(parts) <= 2, parts[0] == "apis" && len(parts) <= 3:
		return sentDiscovery
	case req.URL.Query().Get("watch") == "true", req.URL.Query().Get("watch") == "1":
		return sentWatch
	}
	return sentRead
}

// preflight is how many of sent were the pre-flight's: discovery and access
// reviews.
func preflight(sent map[string]int) int {
	return sent[sentDiscovery] + sent[sentAccessReview] + sent[sentIdentityCheck]
}
