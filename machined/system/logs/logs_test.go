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

// tail reads the last n lines of l through Tail and Copy.
func tail(t *testing.T, l *Log, n int) string {
	t.Helper()

	from, to, err := l.Tail(n)
	if err != nil {
		t.Fatal(err)
	}

	var out strings.Builder

	err = l.Copy(context.Background(), from, to, func(b []byte) error {
		if len(b) > ReadChunk {
			t.Errorf("one send of %d bytes, over ReadChunk", len(b))
		}

		out.Write(b)

		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	return out.String()
}

func TestTail(t *testing.T) {
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
		{"\n\n", 1, "\n"},
		{"", 3, ""},
	}

	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q/%d", tt.in, tt.n), func(t *testing.T) {
			l, err := Open(filepath.Join(t.TempDir(), "svc.log"), 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()

			fmt.Fprint(l, tt.in)

			if got := tail(t, l, tt.n); got != tt.want {
				t.Errorf("tail %d = %q, want %q", tt.n, got, tt.want)
			}
		})
	}
}

// TestTailAcrossRotationInChunks: a tail that starts in the older file and
// spans several chunks of both files comes out whole and in order.
func TestTailAcrossRotationInChunks(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), "svc.log"), 3*ReadChunk)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	var lines []string

	for i := range 5 * ReadChunk / 10 {
		line := fmt.Sprintf("line %04d\n", i%10000)
		lines = append(lines, line)
		fmt.Fprint(l, line)
	}

	// Both files together hold every line: the first rotation came at
	// three chunks, the second is two chunks away.
	for _, n := range []int{1, 100, 3500, 9000, len(lines) + 1, -1} {
		want := strings.Join(lines, "")
		if n > 0 && n < len(lines) {
			want = strings.Join(lines[len(lines)-n:], "")
		}

		if got := tail(t, l, n); got != want {
			t.Errorf("tail %d: %d bytes, want %d", n, len(got), len(want))
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

	if got := tail(t, l, 3); got != "line 47\nline 48\nline 49\n" {
		t.Fatalf("tail = %q", got)
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
