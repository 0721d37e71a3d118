package renewal

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/aegis-os/aegis/internal/clock"
	"github.com/aegis-os/aegis/internal/logkey"
)

// WatchFiles calls reload whenever one of paths changes (inode, size or
// modification time), polling every interval on clk, until ctx ends. Files
// written by atomic rename show up as a new inode. A failed reload keeps the
// old state (reload must not half-apply), is logged once, and is retried on
// the next change.
func WatchFiles(ctx context.Context, clk clock.Clock, interval time.Duration, paths []string, reload func() error, log *slog.Logger) {
	last := stampFiles(paths)

	for {
		if !clock.Sleep(ctx, clk, interval) {
			return
		}

		cur := stampFiles(paths)
		if slices.Equal(cur, last) {
			continue
		}

		last = cur

		if err := reload(); err != nil {
			log.Warn("reload failed, keeping the previous files", slog.Any(logkey.Paths, paths), slog.String(logkey.Error, err.Error()))
		} else {
			log.Info("reloaded", slog.Any(logkey.Paths, paths))
		}
	}
}

type fileStamp struct {
	ino   uint64
	size  int64
	mtime int64
}

// stampFiles records the files' identities; a missing file gets a zero
// stamp, so its reappearance is a change.
func stampFiles(paths []string) []fileStamp {
	stamps := make([]fileStamp, len(paths))

	for i, p := range paths {
		if st, err := os.Stat(p); err == nil {
			stamps[i].size, stamps[i].mtime = st.Size(), st.ModTime().UnixNano()
			if sys, ok := st.Sys().(*syscall.Stat_t); ok {
				stamps[i].ino = sys.Ino
			}
		}
	}

	return stamps
}
