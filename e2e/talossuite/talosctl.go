package talossuite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"
)

// VerbStatus is how a talosctl command of the guide's table went.
type VerbStatus string

// Statuses of a talosctl verb.
const (
	VerbOK VerbStatus = "ok"
	// VerbRefused: the command failed with the answer the guide documents
	// (dmesg's FailedPrecondition on a host, bootstrap of a bootstrapped
	// cluster).
	VerbRefused VerbStatus = "refused as documented"
	VerbFailed  VerbStatus = "failed"
	VerbNotRun  VerbStatus = "not run"
)

// VerbResult is one talosctl command line and its outcome.
type VerbResult struct {
	// Command is the command as the guide's table names it.
	Command string     `json:"command"`
	Args    []string   `json:"args,omitempty"`
	Status  VerbStatus `json:"status"`
	// Detail is the first error line, or why the command was not run.
	Detail string `json:"detail,omitempty"`
}

// TalosctlOptions configure RunTalosctl.
type TalosctlOptions struct {
	// Talosctl is the binary (Build). Required.
	Talosctl string
	// Talosconfig is the client config with an admin context. Required.
	Talosconfig string
	// Nodes are the cluster's: at least three control planes and two
	// workers, so that the destructive verbs have a node of their own.
	Nodes Nodes
	// WorkerConfig is the machine config file of Nodes.Workers[0], for
	// apply-config --dry-run.
	WorkerConfig string
	// LogDir receives each command's output; "" keeps none.
	LogDir string
	// TempDir receives the files commands write (a snapshot, a config).
	TempDir string
	// Bundle is the absolute path of a release bundle of the build the
	// nodes run, for talosctl upgrade; "" does not run it.
	Bundle string
	// Progress receives a line per command. Nil discards.
	Progress io.Writer
}

// GuideCommands returns the commands of the talosctl table in the guide
// (between its talosctl-table markers): every code span of the first
// column that is not a flag.
func GuideCommands(guide []byte) ([]string, error) {
	_, rest, ok := bytes.Cut(guide, []byte("<!-- talosctl-table:start -->"))
	table, _, ok2 := bytes.Cut(rest, []byte("<!-- talosctl-table:end -->"))

	if !ok || !ok2 {
		return nil, errors.New("talossuite: the guide has no talosctl table between its markers")
	}

	var out []string

	for _, line := range strings.Split(string(table), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") {
			continue
		}

		for _, m := range codeSpan.FindAllStringSubmatch(cells[1], -1) {
			if !strings.HasPrefix(m[1], "-") && m[1] != "talosctl command" {
				out = append(out, m[1])
			}
		}
	}

	return out, nil
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// RunTalosctl runs a command line for every command of the guide's table,
// read-only ones first and destructive ones last, each on a node where it
// is safe. A command of the table without a command line here is a
// failure: the table grew and this stage did not.
func RunTalosctl(ctx context.Context, opts TalosctlOptions, commands []string) []VerbResult {
	if len(opts.Nodes.ControlPlanes) < 3 || len(opts.Nodes.Workers) < 2 {
		return []VerbResult{{Command: "*", Status: VerbFailed, Detail: "the talosctl stage needs 3 control planes and 2 workers"}}
	}

	r := &verbRunner{opts: opts, outputs: map[string]string{}}
	plan := verbPlan()
	known := map[string]bool{}

	var out []VerbResult

	for _, v := range plan {
		known[v.command] = true
	}

	for _, c := range commands {
		if !known[c] {
			out = append(out, VerbResult{Command: c, Status: VerbFailed, Detail: "the guide lists it; the talosctl stage has no command line for it (add one to verbPlan)"})
		}
	}

	for _, v := range plan {
		if !contains(commands, v.command) {
			continue
		}

		res := r.run(ctx, v)
		progress(opts.Progress, "%-21s talosctl %s %s", res.Status, strings.Join(res.Args, " "), res.Detail)
		out = append(out, res)
	}

	return out
}

type verbRunner struct {
	opts TalosctlOptions
	// outputs keeps each command's output by the command's name, for a
	// later command that needs a value of it (a member ID, an NTP server).
	outputs map[string]string
	count   int // commands run, for the names of their logs
}

func (r *verbRunner) run(ctx context.Context, v verb) VerbResult {
	res := VerbResult{Command: v.command}

	if v.notRun != "" {
		res.Status, res.Detail = VerbNotRun, v.notRun

		return res
	}

	args, err := v.args(r)

	var skip notRun

	switch {
	case errors.As(err, &skip):
		res.Status, res.Detail = VerbNotRun, skip.Error()

		return res
	case err != nil:
		res.Status, res.Detail = VerbFailed, err.Error()

		return res
	}

	res.Args = args

	out, err := r.talosctl(ctx, args, v.follow)
	r.outputs[v.command] = out
	r.saveLog(args, out, err)

	switch {
	case err == nil:
		res.Status = VerbOK
	case v.accept != "" && strings.Contains(out, v.accept):
		res.Status, res.Detail = VerbRefused, firstErrorLine(out, err)
	default:
		res.Status, res.Detail = VerbFailed, firstErrorLine(out, err)
	}

	if err == nil && v.after != nil {
		if err := v.after(ctx, r); err != nil {
			res.Status, res.Detail = VerbFailed, err.Error()
		}
	}

	return res
}

// saveLog keeps a command's output in LogDir, numbered in run order.
func (r *verbRunner) saveLog(args []string, out string, err error) {
	if r.opts.LogDir == "" {
		return
	}

	r.count++
	var words []string

	for _, a := range args {
		if len(words) < 2 && !strings.HasPrefix(a, "-") && !strings.Contains(a, "/") {
			words = append(words, a)
		}
	}

	name := fmt.Sprintf("%02d-%s.log", r.count, strings.Join(words, "-"))
	text := fmt.Sprintf("$ talosctl %s\n%s\n(exit: %v)\n", strings.Join(args, " "), out, err)

	if werr := writeLog(filepath.Join(r.opts.LogDir, name), []byte(text)); werr != nil {
		progress(r.opts.Progress, "talossuite: %v", werr)
	}
}

// errFollowEnded: a following command ended on its own, or printed
// nothing while it ran.
var errFollowEnded = errors.New("the command was to follow, but it ended or printed nothing")

// talosctl runs one command. A following command (logs -f, events, get
// --watch) passes when it is still running after FollowFor and has
// printed something.
func (r *verbRunner) talosctl(ctx context.Context, args []string, follow bool) (string, error) {
	limit := VerbTimeout
	if follow {
		limit = FollowFor
	}

	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()

	var buf bytes.Buffer

	cmd := exec.CommandContext(ctx, r.opts.Talosctl, append([]string{"--talosconfig", r.opts.Talosconfig}, args...)...)
	cmd.Env = append(os.Environ(), "TALOSCONFIG="+r.opts.Talosconfig)
	cmd.Stdout, cmd.Stderr = &buf, &buf
	cmd.WaitDelay = 5 * time.Second

	err := cmd.Run()

	switch {
	case follow && ctx.Err() != nil && strings.TrimSpace(buf.String()) != "":
		return buf.String(), nil
	case follow && err == nil:
		return buf.String(), errFollowEnded
	case ctx.Err() != nil:
		return buf.String(), fmt.Errorf("no answer within %s", limit)
	}

	return buf.String(), err
}

// firstErrorLine returns the line of the output that says what failed
// (talosctl's "1 error occurred:" joined with the error under it), else
// the command's error.
func firstErrorLine(out string, err error) string {
	lines := strings.Split(out, "\n")

	for i, l := range lines {
		t := strings.TrimSpace(l)
		if !strings.Contains(strings.ToLower(t), "error") && !strings.Contains(t, "rpc ") {
			continue
		}

		for j := i + 1; j < len(lines) && j <= i+2 && strings.HasSuffix(t, ":"); j++ {
			if next := strings.TrimSpace(lines[j]); next != "" {
				t += " " + strings.TrimPrefix(next, "* ")
			}
		}

		return clip(t)
	}

	if err != nil {
		return clip(err.Error())
	}

	return ""
}

// printVerbs writes the verb table.
func printVerbs(w io.Writer, verbs []VerbResult) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TALOSCTL\tSTATUS\tFIRST ERROR LINE / REASON")

	for _, v := range verbs {
		line := v.Command
		if len(v.Args) > 0 {
			line = strings.Join(v.Args, " ")
		}

		fmt.Fprintf(tw, "%s\t%s\t%s\n", line, v.Status, v.Detail)
	}

	tw.Flush() //nolint:errcheck // a terminal
}

func countVerbs(verbs []VerbResult, s VerbStatus) int {
	n := 0

	for _, v := range verbs {
		if v.Status == s {
			n++
		}
	}

	return n
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}

	return false
}
