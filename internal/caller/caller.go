// Package caller names Go functions the way fxkube reports who declared a
// store or a controller: the last element of the package path and the
// function, as in "rollout.newController".
package caller

import (
	"runtime"
	"strings"
)

// Name names the function skip frames above its caller (0 names the caller
// of Name), or "unknown".
func Name(skip int) string {
	pc, _, _, ok := runtime.Caller(skip + 1)
	if !ok {
		return "unknown"
	}
	return FuncName(pc)
}

// FuncName names the function at pc, such as "rollout.newController". A
// generic function's "[...]" is dropped.
func FuncName(pc uintptr) string {
	f := runtime.FuncForPC(pc)
	if f == nil {
		return "unknown"
	}
	name := strings.ReplaceAll(f.Name(), "[...]", "")
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	return name
}
