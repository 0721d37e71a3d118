//go:build !linux

package logfile

import "os"

// syncFile flushes a file's data and metadata to disk.
func syncFile(f *os.File) error {
	return f.Sync()
}
