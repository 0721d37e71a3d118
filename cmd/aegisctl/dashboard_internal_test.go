package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
	"golang.org/x/sys/unix"
)

// TestIsTerminal: a pipe, a buffer and /dev/null are not terminals, so the
// dashboard writes no control codes into them; a pseudo-terminal is.
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

	if isTerminal(w) || isTerminal(&bytes.Buffer{}) || isTerminal(null) {
		t.Fatalf("pipe %v, buffer %v, %s %v; want all false", isTerminal(w), isTerminal(&bytes.Buffer{}), os.DevNull, isTerminal(null))
	}

	if pts := openPTY(t); !isTerminal(pts) {
		t.Fatalf("pseudo-terminal %s is not taken for a terminal", pts.Name())
	}
}

// openPTY opens a pseudo-terminal pair and returns its terminal side.
func openPTY(t *testing.T) *os.File {
	t.Helper()

	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}

	t.Cleanup(func() { ptmx.Close() })

	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}

	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}

	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { pts.Close() })

	return pts
}

// testScreen is a view with a line of every kind, long enough to be cut.
func testScreen() screen {
	var sc screen

	sc.add(lineTitle, `aegis dashboard, context "test", 2026-11-28T10:00:00Z`)
	sc.add(lineText, "")
	sc.addTable("NODE  STAGE    READY\ncp-1  running  yes\nw-1   booting  no\nw-2   error: connection refused by the node\n",
		[]lineKind{lineHeading, lineReady, lineNotReady, lineError})
	sc.add(lineText, "")
	sc.add(lineHeading, "RECENT EVENTS")

	return sc
}

func newTestModel(profile termenv.Profile) (tuiModel, chan struct{}) {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(profile)

	refresh := make(chan struct{}, 1)
	m := newTUIModel(r, 2*time.Second, refresh)
	next, _ := m.Update(screenMsg(testScreen()))

	return next.(tuiModel), refresh
}

func TestDashboardScreenText(t *testing.T) {
	want := `aegis dashboard, context "test", 2026-11-28T10:00:00Z

NODE  STAGE    READY
cp-1  running  yes
w-1   booting  no
w-2   error: connection refused by the node

RECENT EVENTS
`
	if got := testScreen().String(); got != want {
		t.Fatalf("plain view:\n%s\nwant:\n%s", got, want)
	}
}

func TestDashboardKeys(t *testing.T) {
	for _, key := range []tea.KeyMsg{
		{Type: tea.KeyRunes, Runes: []rune("q")}, {Type: tea.KeyEsc}, {Type: tea.KeyCtrlC},
	} {
		t.Run(key.String(), func(t *testing.T) {
			m, _ := newTestModel(termenv.Ascii)

			_, cmd := m.Update(key)
			if cmd == nil {
				t.Fatal("no command; want the program to quit")
			}

			if _, ok := cmd().(tea.QuitMsg); !ok {
				t.Fatalf("command gives %T, want tea.QuitMsg", cmd())
			}
		})
	}

	m, refresh := newTestModel(termenv.Ascii)
	r := tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("r")}

	// Two presses before the reader looks ask for one refresh, never block.
	m.Update(r)
	m.Update(r)

	if len(refresh) != 1 {
		t.Fatalf("%d refreshes asked, want 1", len(refresh))
	}
}

// TestDashboardResize: the view follows the terminal's size, lines cut to
// its width and the view to its height, the footer last.
func TestDashboardResize(t *testing.T) {
	m, _ := newTestModel(termenv.Ascii)

	next, _ := m.Update(tea.WindowSizeMsg{Width: 20, Height: 4})
	lines := strings.Split(next.View(), "\n")

	if len(lines) != 4 {
		t.Fatalf("%d lines on a 4-line terminal:\n%s", len(lines), next.View())
	}

	for _, l := range lines {
		if w := lipgloss.Width(l); w > 20 {
			t.Errorf("line %q is %d cells wide on a 20-cell terminal", l, w)
		}
	}

	if !strings.HasPrefix(lines[3], "q quit") {
		t.Errorf("last line %q, want the keys' footer", lines[3])
	}

	next, _ = next.Update(tea.WindowSizeMsg{Width: 200, Height: 50})
	if v := next.View(); !strings.Contains(v, "error: connection refused by the node") || !strings.Contains(v, "RECENT EVENTS") {
		t.Errorf("a large terminal does not show the whole view:\n%s", v)
	}
}

// TestDashboardColour: rows are coloured by what they say on a colour
// terminal, and left plain where the terminal has no colours.
func TestDashboardColour(t *testing.T) {
	m, _ := newTestModel(termenv.ANSI)
	coloured := m.View()

	for _, row := range []string{"cp-1  running  yes", "w-1   booting  no", "w-2   error"} {
		i := strings.Index(coloured, row)
		if i < 0 || !strings.HasSuffix(coloured[:i], "m") {
			t.Errorf("row %q is not preceded by a colour code:\n%q", row, coloured)
		}
	}

	m, _ = newTestModel(termenv.Ascii)
	if plain := m.View(); strings.Contains(plain, "\x1b") {
		t.Errorf("control codes without colours:\n%q", plain)
	}
}

// TestDashboardFirstView: before the first read ends the terminal says so
// instead of staying blank.
func TestDashboardFirstView(t *testing.T) {
	m := newTUIModel(lipgloss.NewRenderer(io.Discard), time.Second, make(chan struct{}, 1))
	if v := m.View(); !strings.HasPrefix(v, "reading the nodes") {
		t.Fatalf("view before the first read:\n%s", v)
	}
}
