package preflight

import (
	"strings"
	"testing"
)

func TestCheckNamesWhatIsMissing(t *testing.T) {
	err := Check("containerd-that-is-not-installed")
	if err == nil || !strings.Contains(err.Error(), "the containerd-that-is-not-installed binary") {
		t.Fatalf("Check = %v, want the missing binary named", err)
	}
}
