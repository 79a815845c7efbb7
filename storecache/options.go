package storecache

import (
	"fmt"
	"time"
)

// Option configures New. Each prints as the call that made it.
type Option interface {
	fmt.Stringer
	applyTo(*registryCache)
}

type option struct {
	call  string
	apply func(*registryCache)
}

func (o option) String() string           { return o.call }
func (o option) applyTo(c *registryCache) { o.apply(c) }

// WithConsumer names who reads through the cache, for describe and
// metrics, such as a hosted operator's name. Defaults to the function that
// called New.
func WithConsumer(name string) Option {
	return option{fmt.Sprintf("storecache.WithConsumer(%q)", name), func(c *registryCache) { c.consumer = name }}
}

// WithLateSyncTimeout bounds how long a read of a kind first read after
// start waits for its store to sync. Defaults to 2 minutes.
func WithLateSyncTimeout(d time.Duration) Option {
	return option{fmt.Sprintf("storecache.WithLateSyncTimeout(%s)", d), func(c *registryCache) { c.syncTimeout = d }}
}
