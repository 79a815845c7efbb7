// Package caller names Go functions the way fxkube reports who declared a
// store or a controller: the last element of the package path and the
// function, as in "rollout.newController".
package caller

import (
	"fmt"
	"reflect"
	"runtime"
	"strconv"
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
	return shortName(f.Name())
}

// Of names the function fn, such as "rollout.newController", or gives its
// type when it is not a function or is nil.
func Of(fn any) string {
	if v := reflect.ValueOf(fn); v.Kind() == reflect.Func && !v.IsNil() {
		return FuncName(v.Pointer())
	}
	return fmt.Sprintf("%T", fn)
}

func shortName(name string) string {
	name = strings.ReplaceAll(name, "[...]", "")
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	return name
}

// Outside names its caller, or the nearest function above it, that is not
// a function of one of the packages (import paths) given, or "unknown": the
// module function that called a constructor, through whichever of fxkube's
// wrappers.
func Outside(packages ...string) string {
	pcs := make([]uintptr, 32)
	n := runtime.Callers(2, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if !inPackages(f.Function, packages) {
			return shortName(f.Function)
		}
		if !more {
			return "unknown"
		}
	}
}

// inPackages reports whether the function fn (as runtime names it, such as
// "example.com/p.(*T).m") is in one of packages.
func inPackages(fn string, packages []string) bool {
	for _, p := range packages {
		if rest, ok := strings.CutPrefix(fn, p); ok && strings.HasPrefix(rest, ".") {
			return true
		}
	}
	return false
}

// Identity identifies fn by where its code is written, file and line:
// closures of one function literal share it even where the compiler has
// inlined the function returning them (such as controller-runtime's
// cache.TransformStripManagedFields) into different callers, which gives
// each copy code of its own. Empty for a nil fn.
func Identity(fn any) string {
	v := reflect.ValueOf(fn)
	if !v.IsValid() || v.IsNil() {
		return ""
	}
	f := runtime.FuncForPC(v.Pointer())
	if f == nil {
		return strconv.FormatUint(uint64(v.Pointer()), 16)
	}
	file, line := f.FileLine(f.Entry())
	return file + ":" + strconv.Itoa(line)
}
