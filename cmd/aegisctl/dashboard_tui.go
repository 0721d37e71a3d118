package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
)

// screenMsg brings a freshly read view to the terminal UI.
type screenMsg screen

// tuiModel is the dashboard on a terminal (bubbletea): it redraws the last
// view to the terminal's size, colours it by line, and takes keys: q, Esc
// or Ctrl-C end it, r reads the nodes again at once.
type tuiModel struct {
	view          screen
	width, height int
	interval      time.Duration
	styles        map[lineKind]lipgloss.Style
	footer        lipgloss.Style
	// refresh asks the reader for a view now; it never blocks.
	refresh chan<- struct{}
}

func newTUIModel(r *lipgloss.Renderer, interval time.Duration, refresh chan<- struct{}) tuiModel {
	return tuiModel{
		interval: interval,
		refresh:  refresh,
		styles: map[lineKind]lipgloss.Style{
			lineTitle:    r.NewStyle().Bold(true),
			lineHeading:  r.NewStyle().Bold(true).Foreground(lipgloss.Color("12")),
			lineReady:    r.NewStyle().Foreground(lipgloss.Color("10")),
			lineNotReady: r.NewStyle().Foreground(lipgloss.Color("11")),
			lineError:    r.NewStyle().Foreground(lipgloss.Color("9")),
		},
		footer: r.NewStyle().Faint(true),
	}
}

func (m tuiModel) Init() tea.Cmd { return nil }

func (m tuiModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case screenMsg:
		m.view = screen(msg)
	case tea.KeyMsg:
		switch msg.String() {
		case "q", "esc", "ctrl+c":
			return m, tea.Quit
		case "r":
			select {
			case m.refresh <- struct{}{}:
			default: // a refresh is already asked for
			}
		}
	}

	return m, nil
}

// View is the last view cut to the terminal: lines to its width, the view
// to its height less the footer's line.
func (m tuiModel) View() string {
	lines := m.view.lines
	if len(lines) == 0 {
		lines = []screenLine{{text: "reading the nodes…", kind: lineTitle}}
	}

	if m.height > 1 && len(lines) > m.height-1 {
		lines = lines[:m.height-1]
	}

	var b strings.Builder

	for _, l := range lines {
		text := l.text
		if m.width > 0 {
			text = cut(text, m.width)
		}

		if st, ok := m.styles[l.kind]; ok {
			text = st.Render(text)
		}

		b.WriteString(text)
		b.WriteByte('\n')
	}

	b.WriteString(m.footer.Render(cut(fmt.Sprintf("q quit · r refresh · every %s", m.interval), max(m.width, 0))))

	return b.String()
}

// cut shortens plain text to width cells; zero leaves it whole.
func cut(s string, width int) string {
	if width <= 0 || lipgloss.Width(s) <= width {
		return s
	}

	r := []rune(s)
	for len(r) > 0 && lipgloss.Width(string(r)) > width {
		r = r[:len(r)-1]
	}

	return string(r)
}

// runTerminal shows the dashboard on a terminal until a key ends it or ctx
// does. A goroutine reads the nodes every interval, or at once when asked,
// and hands each view to the UI.
func (d *dashboard) runTerminal(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	refresh := make(chan struct{}, 1)
	model := newTUIModel(lipgloss.NewRenderer(d.s.e.stdout), d.interval, refresh)
	prog := tea.NewProgram(model, tea.WithContext(ctx), tea.WithOutput(d.s.e.stdout), tea.WithAltScreen())

	go d.feed(ctx, prog, refresh)

	_, err := prog.Run()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil // interrupted: the end asked for
	}

	return err
}

// feed sends a view, then waits for the interval, a refresh or the end.
func (d *dashboard) feed(ctx context.Context, prog *tea.Program, refresh <-chan struct{}) {
	for {
		prog.Send(screenMsg(d.screen(ctx)))

		t := d.s.e.clock.NewTimer(d.interval)

		select {
		case <-ctx.Done():
			t.Stop()

			return
		case <-refresh:
			t.Stop()
		case <-t.C():
		}
	}
}
