package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// ErrKindNotServed is wrapped by Bind's error when the API server does not
// serve a store's kind.
var ErrKindNotServed = errors.New("kind not served by the API server; is the CRD installed?")

// AccessError reports that the API server would refuse a store's list or
// watch.
type AccessError struct {
	User      string
	Verbs     []string // denied verbs: list, watch
	Resource  string   // resource.group
	Namespace string   // empty for all namespaces
	Reason    string   // from the authorizer, if it gave one
}

func (e *AccessError) Error() string {
	where := "at cluster scope"
	if e.Namespace != "" {
		where = fmt.Sprintf("in namespace %q", e.Namespace)
	}
	msg := fmt.Sprintf("forbidden: user %q cannot %s %s %s", e.User, strings.Join(e.Verbs, " or "), e.Resource, where)
	if e.Reason != "" {
		msg += " (" + e.Reason + ")"
	}
	return msg + "; grant it with RBAC (the app's rbac command prints the rules it needs)"
}

// UnreachableError reports that a request got no answer from the API server:
// the connection was refused or timed out, the name did not resolve, TLS
// failed. Every store fails alike then, so fxstore's Registry.Start
// reports it once, not once per store.
type UnreachableError struct {
	Server string // the API server, as scheme://host[:port]
	Err    error  // why the request got no answer
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the API server at %s: %v; check that --kubeconfig (or $KUBECONFIG) names the right cluster and that its API server is up",
		e.Server, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// SourceWide reports that every store of the Source meets the error alike:
// fxstore's Registry.Start reports it once.
func (e *UnreachableError) SourceWide() bool { return true }

// unreachable returns err as an *UnreachableError if it says that a request
// got no answer, and err otherwise. A request canceled by its caller is not
// one: the API server may be fine.
func unreachable(err error) error {
	urlErr, ok := errors.AsType[*url.Error](err)
	if !ok || errors.Is(err, context.Canceled) {
		return err
	}
	server := urlErr.URL
	if u, perr := url.Parse(urlErr.URL); perr == nil && u.Host != "" {
		server = u.Scheme + "://" + u.Host
	}
	return &UnreachableError{Server: server, Err: urlErr.Err}
}
