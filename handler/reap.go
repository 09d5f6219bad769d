package handler

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"
	"time"
)

// consumerVar marks an Exec's processes with the consumer session whose
// run they are: every process a run starts inherits it, whatever process
// group or session it moves to, so a consumer recovering after that one
// was killed finds them all (reapSession).
const consumerVar = "SPOOL_CONSUMER"

// reapWait bounds how long ReapCalls waits for the processes it killed to
// be gone.
const reapWait = 2 * time.Second

// ReapCalls kills the processes that the runs of session, a dead
// consumer's session, left on this host and that this process can see
// (spool.CallReaper), with their process groups: those found by
// SPOOL_CONSUMER in their environment, in /proc. A run's shell dies with
// its consumer (runShell), but what it started does not. It waits a
// little for them to be gone, so that the calls lock they held is free
// when the consumer probes it next. A process that cleared its
// environment, runs as another user or in another PID namespace is not
// found; the calls lock, which every process of a run inherits, still
// holds its msg_ids (spool.LockingCaller).
func (h *Exec) ReapCalls(session string) error {
	_, err := reapSession(session, reapWait)
	return err
}

// reapSession kills every process whose environment holds
// SPOOL_CONSUMER=session, and the process group of each, until none is
// left or wait has passed; it reports whether none is left. It never kills
// its own process or process group.
func reapSession(session string, wait time.Duration) (bool, error) {
	mark := []byte(consumerVar + "=" + session + "\x00")
	self, group := os.Getpid(), syscall.Getpgrp()
	deadline := time.Now().Add(wait)
	for {
		pids, err := marked(mark, self)
		if err != nil {
			return false, fmt.Errorf("reap calls of %s: %w", session, err)
		}
		if len(pids) == 0 {
			return true, nil
		}
		for _, pid := range pids {
			if pgid, err := syscall.Getpgid(pid); err == nil && pgid > 1 && pgid != group {
				_ = syscall.Kill(-pgid, syscall.SIGKILL) // gone already: nothing to do
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		time.Sleep(10 * time.Millisecond) // for the kernel to end them
	}
}

// marked lists the processes of this host whose environment holds mark
// (a whole NAME=VALUE entry with its NUL), but self. A process that has
// exited (a zombie) has no environment left, and is not listed.
func marked(mark []byte, self int) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	entry := append([]byte{0}, mark...)
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ESRCH):
			continue // gone, or not ours to read (another user's)
		case err != nil:
			return nil, err
		}
		if bytes.HasPrefix(env, mark) || bytes.Contains(env, entry) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}
