package persistence

// SetSplitBufferMin sets the size from which a restored buffer is assembled as several files, for a
// test that restores a small one that way; the returned func puts it back.
func SetSplitBufferMin(n int64) func() {
	old := splitBufferMin.Swap(n)
	return func() { splitBufferMin.Store(old) }
}
