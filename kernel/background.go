package kernel

// BackgroundProcess is a process a kernel started that was still running when its kernel was
// stopped on purpose (rotation, hibernation, stop): a server, a subprocess.Popen. It cannot
// survive the kernel, so the session names it instead of letting it vanish silently.
type BackgroundProcess struct {
	PID     int    `json:"pid"`     // as the session saw it (its sandbox's pid namespace)
	Command string `json:"command"` // the command line, arguments joined by spaces
}

// BackgroundLister is a KernelProcess that can list the kernel's background processes
// (kernel/sandbox: every process of the box but the kernel itself). A non-nil list, empty or not,
// is what runs; nil means it cannot tell (the kernel is dying: its box is taking the others down).
type BackgroundLister interface {
	Background() []BackgroundProcess
}

// Background lists k's background processes where its provisioner can tell (nil otherwise).
func (k *Kernel) Background() []BackgroundProcess {
	if bl, ok := k.Process().(BackgroundLister); ok {
		return bl.Background()
	}
	return nil
}
