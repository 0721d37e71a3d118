package logs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLastLines(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc", 2, "b\nc"},
		{"a\nb\nc\n", 5, "a\nb\nc\n"},
		{"a\nb\nc\n", 0, ""},
		{"a\nb\nc\n", -1, "a\nb\nc\n"},
		{"", 3, ""},
	}

	for _, tt := range tests {
		if got := string(lastLines([]byte(tt.in), tt.n)); got != tt.want {
			t.Errorf("lastLines(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestRotationKeepsBoundAndTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logs", "svc.log")

	l, err := Open(path, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	for i := range 50 {
		fmt.Fprintf(l, "line %02d\n", i)
	}

	for _, p := range []string{path, path + ".1"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}

		if st.Size() > 100 || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: size %d mode %v", p, st.Size(), st.Mode().Perm())
		}
	}

	tail, _, err := l.Tail(3)
	if err != nil {
		t.Fatal(err)
	}

	if string(tail) != "line 47\nline 48\nline 49\n" {
		t.Fatalf("tail = %q", tail)
	}
}

// TestFollowAcrossRotation: a follower sees every line written after its
// position, including those written across a rotation. The 87 bytes written
// rotate the 64-byte log exactly once, which a follower may lag behind by
// without losing anything.
func TestFollowAcrossRotation(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), "svc.log"), 64)
	if err != nil {
		t.Fatal(err)
	}

	fmt.Fprintln(l, "before")

	_, pos, err := l.Tail(0)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	got := make(chan string, 100)
	done := make(chan error, 1)

	go func() {
		done <- l.Follow(ctx, pos, func(b []byte) error {
			got <- string(b)

			return nil
		})
	}()

	var want strings.Builder

	for i := range 10 {
		line := fmt.Sprintf("after %d\n", i)
		want.WriteString(line)
		fmt.Fprint(l, line)
	}

	var all strings.Builder
	for all.Len() < want.Len() {
		select {
		case s := <-got:
			all.WriteString(s)
		case <-ctx.Done():
			t.Fatalf("followed %q, want %q", all.String(), want.String())
		}
	}

	if all.String() != want.String() {
		t.Fatalf("followed %q, want %q", all.String(), want.String())
	}

	l.Close()

	if err := <-done; err != nil {
		t.Fatalf("Follow after close: %v", err)
	}
}
