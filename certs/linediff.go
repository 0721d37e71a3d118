package certs

import "strings"

// MaxDiffLines bounds the documents LineDiff compares: its table is
// quadratic, and a machine config is a few hundred lines.
const MaxDiffLines = 4000

// LineDiff returns a unified-style line diff of two texts ("-" removed,
// "+" added, " " kept within context lines of a change), empty when they
// are equal.
func LineDiff(a, b string, context int) string {
	x, y := strings.Split(strings.TrimSuffix(a, "\n"), "\n"), strings.Split(strings.TrimSuffix(b, "\n"), "\n")
	if len(x) > MaxDiffLines || len(y) > MaxDiffLines {
		return "(documents too long to compare line by line)\n"
	}

	ops := editScript(x, y)

	var sb strings.Builder

	for i, op := range ops {
		if op.kind == ' ' && !nearChange(ops, i, context) {
			continue
		}

		sb.WriteByte(op.kind)
		sb.WriteString(op.line)
		sb.WriteByte('\n')
	}

	return sb.String()
}

type diffOp struct {
	kind byte
	line string
}

// editScript is the longest-common-subsequence edit script of x into y.
func editScript(x, y []string) []diffOp {
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}

	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}

	var ops []diffOp

	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			ops = append(ops, diffOp{' ', x[i]})
			i, j = i+1, j+1
		case i < len(x) && (j == len(y) || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, diffOp{'-', x[i]})
			i++
		default:
			ops = append(ops, diffOp{'+', y[j]})
			j++
		}
	}

	return ops
}

func nearChange(ops []diffOp, i, context int) bool {
	for k := max(0, i-context); k <= min(len(ops)-1, i+context); k++ {
		if ops[k].kind != ' ' {
			return true
		}
	}

	return false
}
