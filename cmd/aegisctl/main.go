// Command aegisctl is the Aegis operator CLI: it generates secrets, configs
// and certificates, manages the client config's contexts, runs local
// clusters and drives nodes through their API.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// An interrupt cancels the command's calls: a follow (logs -f, events)
	// ends cleanly, anything else ends with the interrupted call's error.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)

	err := newRootCommand(newEnv()).ExecuteContext(ctx)

	stop()

	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
