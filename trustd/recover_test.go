package trustd_test

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"

	"github.com/aegis-os/aegis/internal/grpcrecover/recovertest"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()

	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()

	return b.buf.String()
}

// A panicking handler on the server trustd.New builds answers Internal
// with a reference that is in the log line with the stack, and the next
// call is served.
func TestPanicRecovered(t *testing.T) {
	var logs lockedBuffer

	env := trustdtest.Start(t, trustdtest.Options{
		GateOpen:    true,
		Logger:      slog.New(slog.NewJSONHandler(&logs, nil)),
		BeforeServe: func(s *trustd.Server) { trustd.RegisterOnServer(s, recovertest.Register) },
	})

	recovertest.Check(t.Context(), t, env.Dial(t, ""), logs.String)
}
