package main

import "strings"

// lineKind says what a line of the dashboard is, for a terminal to colour
// it; a file gets the text alone.
type lineKind int

const (
	lineText lineKind = iota
	lineTitle
	// lineHeading is a table's header or a section's title.
	lineHeading
	lineReady
	lineNotReady
	lineError
)

// screenLine is one line of the dashboard, without its newline.
type screenLine struct {
	text string
	kind lineKind
}

// screen is one view of the nodes, line by line.
type screen struct {
	lines []screenLine
}

func (s *screen) add(kind lineKind, text string) {
	s.lines = append(s.lines, screenLine{text: text, kind: kind})
}

func (s *screen) addAll(kind lineKind, texts []string) {
	for _, t := range texts {
		s.add(kind, t)
	}
}

// addTable adds the lines of an aligned table, the i-th of kind kinds[i];
// lines beyond kinds are plain text.
func (s *screen) addTable(table string, kinds []lineKind) {
	for i, line := range strings.Split(strings.TrimSuffix(table, "\n"), "\n") {
		if table == "" {
			return
		}

		kind := lineText
		if i < len(kinds) {
			kind = kinds[i]
		}

		s.add(kind, line)
	}
}

// String is the view as plain text, each line ended by a newline.
func (s screen) String() string {
	var b strings.Builder

	for _, l := range s.lines {
		b.WriteString(l.text)
		b.WriteByte('\n')
	}

	return b.String()
}
