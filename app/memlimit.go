package app

import (
	"math"
	"os"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"go.uber.org/zap"
)

// memoryLimitRatio is the share of the container's memory that Go's memory
// limit is set to, leaving room for what the Go runtime does not count.
const memoryLimitRatio = 0.9

// setMemoryLimit sets Go's memory limit to 90% of the container's, as
// container reports it, unless the GOMEMLIMIT (or AUTOMEMLIMIT=off)
// environment variable says otherwise: the garbage collector then works
// harder as the heap nears the limit, before the kernel kills the process.
// It logs the limit in force.
func setMemoryLimit(log *zap.Logger, container memlimit.Provider) {
	limit, err := memlimit.Set(memlimit.WithProvider(container), memlimit.WithRatio(memoryLimitRatio))
	if err != nil {
		log.Warn("cannot set Go's memory limit from the container's; set GOMEMLIMIT", zap.Error(err))
	}
	source := "container"
	switch {
	case os.Getenv("GOMEMLIMIT") != "":
		source = "GOMEMLIMIT"
	case os.Getenv("AUTOMEMLIMIT") == "off":
		source = "AUTOMEMLIMIT=off"
	}
	if limit == math.MaxInt64 {
		log.Info("Go's memory limit: none", zap.String("source", source))
		return
	}
	log.Info("Go's memory limit", zap.Int64("bytes", limit), zap.String("source", source))
}
