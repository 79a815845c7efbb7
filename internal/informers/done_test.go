package informers_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fxkube/fxkube/internal/informers"
)

// waitState is how a Wait stands when AllDone is asked.
type waitState int

const (
	pending waitState = iota // neither done nor gone
	done
	gone
)

// fakeWait is a Wait whose channels a test closes, and which records the
// calls of its Done.
type fakeWait struct {
	done, gone chan struct{}

	mu    sync.Mutex
	calls int
}

func newFakeWait(s waitState) *fakeWait {
	w := &fakeWait{done: make(chan struct{}), gone: make(chan struct{})}
	switch s {
	case done:
		close(w.done)
	case gone:
		close(w.gone)
	}
	return w
}

func (w *fakeWait) wait() informers.Wait {
	return informers.Wait{
		Done: func() <-chan struct{} {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.calls++
			return w.done
		},
		Gone: w.gone,
	}
}

func (w *fakeWait) called() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls > 0
}

func TestAllDone(t *testing.T) {
	tests := []struct {
		name     string
		give     []waitState
		giveStop bool // stop is closed
		want     bool // done
	}{
		{name: "no waits", want: true},
		{name: "every wait done", give: []waitState{done, done}, want: true},
		{name: "every wait done or gone", give: []waitState{gone, done, gone}, want: true},
		{name: "a wait pending", give: []waitState{done, pending}, want: false},
		{name: "the first wait pending", give: []waitState{pending, done}, want: false},
		{name: "a wait pending, stop closed", give: []waitState{done, pending}, giveStop: true, want: true},
		{name: "every wait pending, stop closed", give: []waitState{pending, pending}, giveStop: true, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stop := make(chan struct{})
			if tt.giveStop {
				close(stop)
			}
			var fakes []*fakeWait
			var waits []informers.Wait
			for _, s := range tt.give {
				w := newFakeWait(s)
				fakes = append(fakes, w)
				waits = append(waits, w.wait())
			}
			c := informers.AllDone("test waits", stop, waits...)
			require.Equal(t, "test waits", c.Name())
			for _, w := range fakes {
				require.False(t, w.called(), "waited before Done was called")
			}

			if tt.want {
				require.Eventually(t, isDone(c), wait, time.Millisecond, "never done")
				return
			}
			// Once the goroutine is at the first pending wait, nothing but
			// that wait (or stop) may let it finish.
			var first *fakeWait
			for i, s := range tt.give {
				if s == pending {
					first = fakes[i]
					break
				}
			}
			_ = c.Done()
			require.Eventually(t, first.called, wait, time.Millisecond, "the pending wait was never waited for")
			require.Never(t, isDone(c), never, never/10, "done with a wait pending")

			// The pending waits' things end, one done and the rest gone.
			for i, s := range tt.give {
				if s != pending {
					continue
				}
				if fakes[i] == first {
					close(fakes[i].done)
				} else {
					close(fakes[i].gone)
				}
			}
			require.Eventually(t, isDone(c), wait, time.Millisecond, "never done once every wait was")
		})
	}
}

func TestAllDoneIsOneChannel(t *testing.T) {
	w := newFakeWait(pending)
	stop := make(chan struct{})
	c := informers.AllDone("test waits", stop, w.wait())
	first := c.Done()
	require.Equal(t, first, c.Done(), "Done returns one channel")
	require.Eventually(t, w.called, wait, time.Millisecond)

	close(stop)
	select {
	case <-first:
	case <-time.After(wait):
		t.Fatal("never done once stop was closed")
	}
	require.Equal(t, first, c.Done())
}
