// Command aegisctl is the Aegis operator CLI: it generates secrets, configs
// and certificates, and manages the client config's contexts.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCommand(newEnv()).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
