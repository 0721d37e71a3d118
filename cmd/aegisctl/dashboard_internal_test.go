package main

import (
	"bytes"
	"os"
	"testing"
)

// TestIsTerminal: a pipe and a buffer are not terminals, so the dashboard
// writes no control codes into them; a character device is.
func TestIsTerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}

	defer r.Close()
	defer w.Close()

	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}

	defer null.Close()

	if isTerminal(w) || isTerminal(&bytes.Buffer{}) || !isTerminal(null) {
		t.Fatalf("pipe %v, buffer %v, %s %v; want false, false, true", isTerminal(w), isTerminal(&bytes.Buffer{}), os.DevNull, isTerminal(null))
	}
}
