package trustd_test

import (
	"testing"

	"github.com/aegis-os/aegis/internal/grpcrecover/recovertest"
	"github.com/aegis-os/aegis/internal/logtest"
	"github.com/aegis-os/aegis/trustd"
	"github.com/aegis-os/aegis/trustd/trustdtest"
)

// A panicking handler on the server trustd.New builds answers Internal
// with a reference that is in the log line with the stack, and the next
// call is served.
func TestPanicRecovered(t *testing.T) {
	var logs logtest.Sink

	env := trustdtest.Start(t, trustdtest.Options{
		GateOpen:    true,
		Logger:      logs.Logger(),
		BeforeServe: func(s *trustd.Server) { trustd.RegisterOnServer(s, recovertest.Register) },
	})

	recovertest.Check(t.Context(), t, env.Dial(t, ""), logs.String)
}
