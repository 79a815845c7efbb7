package app

import (
	"math"
	"os"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestSetMemoryLimit(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		name      string
		env       map[string]string
		container memlimit.Provider
		want      int64
		log       string
		source    string
	}{
		{name: "container limit", container: memlimit.Limit(gib), want: gib * 9 / 10, log: "Go's memory limit", source: "container"},
		{name: "no container limit", container: func() (uint64, error) { return 0, memlimit.ErrNoLimit }, want: math.MaxInt64, log: "Go's memory limit: none", source: "container"},
		{name: "GOMEMLIMIT wins", env: map[string]string{"GOMEMLIMIT": "2GiB"}, container: memlimit.Limit(gib), want: 2 * gib, log: "Go's memory limit", source: "GOMEMLIMIT"},
		{name: "AUTOMEMLIMIT=off", env: map[string]string{"AUTOMEMLIMIT": "off"}, container: memlimit.Limit(gib), want: math.MaxInt64, log: "Go's memory limit: none", source: "AUTOMEMLIMIT=off"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			previous := debug.SetMemoryLimit(math.MaxInt64)
			t.Cleanup(func() { debug.SetMemoryLimit(previous) })
			for _, k := range []string{"GOMEMLIMIT", "AUTOMEMLIMIT"} {
				t.Setenv(k, "") // restored when the test ends
				require.NoError(t, os.Unsetenv(k))
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			if tt.env["GOMEMLIMIT"] != "" {
				debug.SetMemoryLimit(2 * gib) // as the runtime does at start from GOMEMLIMIT
			}
			core, logs := observer.New(zapcore.InfoLevel)

			setMemoryLimit(zap.New(core), tt.container)

			assert.Equal(t, tt.want, debug.SetMemoryLimit(-1), "the limit in force")
			entries := logs.FilterMessage(tt.log).All()
			require.Len(t, entries, 1, "logged once: %v", logs.All())
			assert.Equal(t, tt.source, entries[0].ContextMap()["source"])
			if tt.want != math.MaxInt64 {
				assert.Equal(t, tt.want, entries[0].ContextMap()["bytes"])
			}
		})
	}
}
