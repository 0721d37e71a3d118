package runner

import (
	"fmt"
	"math"
	"os/exec"
	"runtime"
	"syscall"
)

// minNice is the lowest nice value, the highest priority (setpriority(2)).
const minNice = -20

// startNiced starts cmd with nice (zero or negative) added to machined's
// own nice value, and says why it could not when the kernel refused it
// (lowering a nice value needs CAP_SYS_NICE): the process then runs at
// machined's.
//
// On Linux a nice value belongs to a thread, and a new thread or process
// takes the value of the thread that made it. So the value is set on a
// thread of machined's own, locked to this goroutine, for the moment it
// forks, and set back before the thread returns to the Go runtime: the
// process and every thread it starts run at the value from their first
// instruction, and no other goroutine of machined runs at it.
func startNiced(cmd *exec.Cmd, nice int) (refused, err error) {
	switch {
	case nice == 0:
		return nil, cmd.Start()
	case nice > 0:
		// Setting the thread back would lower its value, which needs
		// CAP_SYS_NICE: without it, the thread would keep the value.
		return nil, fmt.Errorf("nice %d: only a higher priority (a negative value) is supported", nice)
	}

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	own, err := threadNice()
	if err != nil {
		return err, cmd.Start()
	}

	want := max(own+nice, minNice)
	if err := setThreadNice(want); err != nil {
		return fmt.Errorf("nice %d: %w", want, err), cmd.Start()
	}

	err = cmd.Start()

	// Raising a nice value back is always allowed; were it refused, one
	// of machined's threads would run ahead of the others, nothing worse.
	if restoreErr := setThreadNice(own); restoreErr != nil {
		return fmt.Errorf("setting machined's thread back to nice %d: %w", own, restoreErr), err
	}

	return nil, err
}

// threadNice is the calling thread's nice value. The system call answers
// 20 minus it, so that no answer is negative.
func threadNice() (int, error) {
	prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		return 0, fmt.Errorf("reading machined's nice value: %w", err)
	}

	return 20 - prio, nil
}

// setThreadNice sets the calling thread's nice value (PRIO_PROCESS of 0
// is the calling thread, on Linux).
func setThreadNice(nice int) error {
	return syscall.Setpriority(syscall.PRIO_PROCESS, 0, nice)
}

// SharesOfNice is the cpu.shares that weighs a container's cgroup against
// its siblings (each at the default, 1024) as the kernel weighs a process
// at nice against one at 0: 1.25 times more for each step lower. Zero for
// nice 0 or above, which keeps the default.
func SharesOfNice(nice int) uint64 {
	if nice >= 0 {
		return 0
	}

	return uint64(math.Round(defaultShares * math.Pow(1.25, float64(-max(nice, minNice)))))
}

// defaultShares is a cgroup's cpu.shares unless set.
const defaultShares = 1024
