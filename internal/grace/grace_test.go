package grace

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type valueKey struct{}

func TestContext(t *testing.T) {
	until, endGrace := context.WithCancelCause(context.Background())
	run, stop := context.WithCancel(With(context.WithValue(context.Background(), valueKey{}, "v"), until))
	work, done := Context(run)
	defer done()

	stop()
	require.NoError(t, work.Err(), "the work outlives its runnable's context")
	assert.Equal(t, "v", work.Value(valueKey{}), "and keeps its values")

	bound := errors.New("stop bound reached")
	endGrace(bound)
	<-work.Done()
	assert.ErrorIs(t, context.Cause(work), bound, "it ends with the grace context")
}

func TestContextWithoutGrace(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	work, done := Context(ctx)
	defer done()
	assert.Equal(t, ctx, work, "without a grace context, work ends with its runnable's")
	cancel()
	assert.Error(t, work.Err())
}

func TestContextDone(t *testing.T) {
	until, endGrace := context.WithCancel(context.Background())
	defer endGrace()
	work, done := Context(With(context.Background(), until))
	done()
	assert.ErrorIs(t, work.Err(), context.Canceled, "done ends the work's context")
}

func TestStoppable(t *testing.T) {
	ctx := WithStopTimeout(context.Background(), time.Hour)
	run, stop, end := Stoppable(ctx)
	work, done := Context(run)
	defer done()
	stop()
	<-run.Done()
	require.NoError(t, work.Err(), "work in flight runs on once its part is told to stop")
	end()
	<-work.Done()
}

func TestStoppableBound(t *testing.T) {
	run, stop, end := Stoppable(WithStopTimeout(context.Background(), time.Millisecond))
	defer end()
	work, done := Context(run)
	defer done()
	stop()
	<-work.Done() // within the bound, not at end
}

func TestStoppableFollowsTheAppsGrace(t *testing.T) {
	until, endGrace := context.WithCancel(context.Background())
	app, stopApp := context.WithCancel(With(context.Background(), until))
	run, _, end := Stoppable(app)
	defer end()
	work, done := Context(run)
	defer done()
	stopApp()
	<-run.Done()
	require.NoError(t, work.Err(), "the app's stop leaves work its grace")
	endGrace()
	<-work.Done()
}
