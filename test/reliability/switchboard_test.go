package reliability

import (
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"
)

// switchboard sits between an app and its API server, and can cut the app
// off: Cut ends every watch in flight cleanly, as a proxy that drops
// connections would, and refuses new requests with "connection refused"
// until Restore. Unlike stopping the API server, it leaves the server, and
// its watch cache, as they were, so that how a watch resumes depends on etcd
// alone.
type switchboard struct {
	next http.RoundTripper

	mu      sync.Mutex
	cut     bool
	watches map[*cuttableBody]struct{}
}

func newSwitchboard(next http.RoundTripper) *switchboard {
	return &switchboard{next: next, watches: make(map[*cuttableBody]struct{})}
}

// RoundTrip implements http.RoundTripper.
func (s *switchboard) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	cut := s.cut
	s.mu.Unlock()
	if cut {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	resp, err := s.next.RoundTrip(req)
	if err != nil || req.URL.Query().Get("watch") != "true" {
		return resp, err
	}
	body := &cuttableBody{ReadCloser: resp.Body, board: s, path: req.URL.Path, since: time.Now()}
	s.mu.Lock()
	s.watches[body] = struct{}{}
	s.mu.Unlock()
	resp.Body = body
	return resp, nil
}

// watching reports whether, for each of paths, such as "/api/v1/secrets", a
// watch has been open for at least age. client-go lists again, rather than
// resume, after a watch that ends within a second of its start.
func (s *switchboard) watching(age time.Duration, paths ...string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range paths {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(s.watches)), func(b *cuttableBody) bool {
			return b.path == p && time.Since(b.since) >= age
		}) {
			return false
		}
	}
	return true
}

// Cut ends the watches in flight and refuses requests until Restore.
func (s *switchboard) Cut() {
	s.mu.Lock()
	s.cut = true
	watches := s.watches
	s.watches = make(map[*cuttableBody]struct{})
	s.mu.Unlock()
	for w := range watches {
		w.cut()
	}
}

// Restore lets requests through again.
func (s *switchboard) Restore() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cut = false
}

// cuttableBody is the body of a watch, which reads as ended (io.EOF, a
// clean end) once cut.
type cuttableBody struct {
	io.ReadCloser
	board *switchboard
	path  string
	since time.Time

	mu     sync.Mutex
	isCut  bool
	closed bool
}

func (b *cuttableBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.isCut {
		return 0, io.EOF
	}
	return n, err
}

func (b *cuttableBody) cut() {
	b.mu.Lock()
	b.isCut = true
	b.mu.Unlock()
	// Unblocks a Read waiting for the next event.
	_ = b.Close()
}

func (b *cuttableBody) Close() error {
	b.mu.Lock()
	closed := b.closed
	b.closed = true
	b.mu.Unlock()
	b.board.mu.Lock()
	delete(b.board.watches, b)
	b.board.mu.Unlock()
	if closed {
		return nil
	}
	return b.ReadCloser.Close()
}
