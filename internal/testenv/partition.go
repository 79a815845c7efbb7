package testenv

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"
)

// A Partition cuts a client off its API server while cut: new requests
// fail, and so do reads of responses in flight, watches included. Give
// it to a rest.Config with cfg.Wrap(p.Wrap).
type Partition struct {
	cut atomic.Bool
}

// ErrPartitioned is what a request through a cut Partition fails with.
var ErrPartitioned = errors.New("partitioned by the test")

// Cut cuts the client off; Heal lets it through again.
func (p *Partition) Cut() { p.cut.Store(true) }

// Heal lets the client through again.
func (p *Partition) Heal() { p.cut.Store(false) }

// Wrap wraps a client's transport; see rest.Config.Wrap.
func (p *Partition) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if p.cut.Load() {
			return nil, ErrPartitioned
		}
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body = &cutBody{ReadCloser: resp.Body, p: p}
		}
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

type cutBody struct {
	io.ReadCloser
	p *Partition
}

func (b *cutBody) Read(p []byte) (int, error) {
	if b.p.cut.Load() {
		return 0, ErrPartitioned
	}
	return b.ReadCloser.Read(p)
}
