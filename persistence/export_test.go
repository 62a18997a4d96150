package persistence

// SetSplitBufferMin sets the size from which a restored buffer is assembled as several files, for a
// test that restores a small one that way; the returned func puts it back.
func SetSplitBufferMin(n int64) func() {
	old := splitBufferMin.Swap(n)
	return func() { splitBufferMin.Store(old) }
}

// SetLazyBufferMin sets the size from which a buffer is restored lazily; the returned func puts it back.
func SetLazyBufferMin(n int64) func() {
	old := lazyBufferMin.Swap(n)
	return func() { lazyBufferMin.Store(old) }
}

// SetLazyHold holds every lazy fill (only chunks a thread faults on are filled) while on; the
// returned func releases it.
func SetLazyHold() func() {
	lazyHold.Store(true)
	return func() { lazyHold.Store(false) }
}

// SetLazyDeaf leaves every lazy fill's faults unanswered while on; the returned func answers them again.
func SetLazyDeaf() func() {
	lazyDeaf.Store(true)
	return func() { lazyDeaf.Store(false) }
}

// StopLazyFills closes every running fill's userfaultfd and socket, as the server's exit would.
func StopLazyFills() {
	liveFills.Range(func(f, _ any) bool {
		f.(*lazyFill).stop()
		return true
	})
}

// SetLazyBeforeCopy calls h in each fill worker between a chunk's read and its copy; the returned
// func removes it.
func SetLazyBeforeCopy(h func()) func() {
	lazyBeforeCopy.Store(&h)
	return func() { lazyBeforeCopy.Store(nil) }
}

// SetLazyEnded calls h with each fill's error (nil: none) when its workers are done; the returned
// func removes it.
func SetLazyEnded(h func(error)) func() {
	lazyEnded.Store(&h)
	return func() { lazyEnded.Store(nil) }
}

// LazyFillsRunning counts the fills whose userfaultfd is still open.
func LazyFillsRunning() int {
	n := 0
	liveFills.Range(func(_, _ any) bool { n++; return true })
	return n
}

// SetSharedBufferMin sets the size from which a buffer is shared; the returned func puts it back.
func SetSharedBufferMin(n int64) func() {
	old := sharedBufferMin.Swap(n)
	return func() { sharedBufferMin.Store(old) }
}
