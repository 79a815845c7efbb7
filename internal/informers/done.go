package informers

import (
	"sync"

	"k8s.io/client-go/tools/cache"
)

// Wait is one thing AllDone waits for: Done, unless Gone is closed first
// (the thing waited for went away). A nil Gone never closes.
type Wait struct {
	Done func() <-chan struct{}
	Gone <-chan struct{}
}

// AllDone returns a checker done once every wait is, or once stop is
// closed. Its goroutine starts when Done is first called, and ends with
// it. A wait whose informer stops before it has synced never completes:
// its goroutine then lives until stop, or the process, ends.
func AllDone(name string, stop <-chan struct{}, waits ...Wait) cache.DoneChecker {
	return &allDone{name: name, stop: stop, waits: waits}
}

type allDone struct {
	name  string
	stop  <-chan struct{}
	waits []Wait

	once sync.Once
	done chan struct{}
}

func (a *allDone) Name() string { return a.name }

func (a *allDone) Done() <-chan struct{} {
	a.once.Do(func() {
		a.done = make(chan struct{})
		go a.wait()
	})
	return a.done
}

func (a *allDone) wait() {
	for _, w := range a.waits {
		select {
		case <-w.Done():
		case <-w.Gone:
		case <-a.stop:
			close(a.done)
			return
		}
	}
	close(a.done)
}
