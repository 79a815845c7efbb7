package testenv

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Process is a running process, as /proc shows it.
type Process struct {
	PID  int
	Name string // its command name, at most 15 bytes (Linux's comm)
}

// Descendants returns the processes below pid, read from /proc. Tests use
// it to find the kube-apiservers and etcds a command started, which must
// be gone once it has exited.
func Descendants(tb testing.TB, pid int) []Process {
	tb.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		tb.Fatal(err)
	}
	children := make(map[int][]Process)
	for _, path := range stats {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue // ended since the glob
		}
		p, ppid, err := parseStat(string(raw))
		if err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
		children[ppid] = append(children[ppid], p)
	}
	var all []Process
	for next := []int{pid}; len(next) > 0; {
		parent := next[0]
		next = next[1:]
		for _, c := range children[parent] {
			all = append(all, c)
			next = append(next, c.PID)
		}
	}
	return all
}

// Alive reports whether p still runs: its pid names a process of its name
// that is not a zombie.
func (p Process) Alive() bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.PID))
	if err != nil {
		return false
	}
	now, _, err := parseStat(string(raw))
	state := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	return err == nil && now == p && len(state) > 0 && state[0] != "Z"
}

// parseStat reads a process and its parent's pid from its /proc/<pid>/stat:
// "pid (comm) state ppid ...", where comm may hold spaces and parentheses.
func parseStat(stat string) (Process, int, error) {
	open, end := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || end < open {
		return Process{}, 0, fmt.Errorf("stat %q: no (comm)", stat)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(stat[:open]))
	if err != nil {
		return Process{}, 0, fmt.Errorf("stat %q: pid: %w", stat, err)
	}
	rest := strings.Fields(stat[end+1:])
	if len(rest) < 2 {
		return Process{}, 0, fmt.Errorf("stat %q: no ppid", stat)
	}
	ppid, err := strconv.Atoi(rest[1])
	if err != nil {
		return Process{}, 0, fmt.Errorf("stat %q: ppid: %w", stat, err)
	}
	return Process{PID: pid, Name: stat[open+1 : end]}, ppid, nil
}
