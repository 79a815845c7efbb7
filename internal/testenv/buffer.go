package testenv

import (
	"bytes"
	"slices"
	"sync"
)

// Buffer is a bytes.Buffer that a running command writes while a test
// reads it.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Records is a list that goroutines add to while a test reads it: the
// events a fake saw, the errors a handler heard.
type Records[T any] struct {
	mu    sync.Mutex
	items []T
}

// Add appends v.
func (r *Records[T]) Add(v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.items = append(r.items, v)
}

// All returns a copy of what was added so far, in order.
func (r *Records[T]) All() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.items)
}
