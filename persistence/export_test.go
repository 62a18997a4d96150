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
