// Package talossuite runs Talos's own API integration suite
// (internal/integration of github.com/siderolabs/talos, the api suites)
// and the real talosctl against an Aegis cluster. It builds both from the
// Talos module, patched only in node discovery (the node list comes from
// NodesEnv), runs every test the expectation file says Aegis serves, one
// process per test, and reports per suite.
package talossuite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/aegis-os/aegis/internal/defaults"
)

// TalosModule is the module the suite and talosctl come from.
const TalosModule = "github.com/siderolabs/talos"

// machineryModule is the nested module Talos's go.mod replaces with its
// own folder; the module zip has no such folder, so the replace goes and
// machinery comes from the proxy at the same version.
const machineryModule = TalosModule + "/pkg/machinery"

// BuildOptions configure Build.
type BuildOptions struct {
	// Version of TalosModule, e.g. "v1.11.5". Required.
	Version string
	// Dir is where the copy of the source and the binaries go
	// (Dir/VERSION/src, Dir/VERSION/bin). Required.
	Dir string
	// Go is the go command; "" is "go".
	Go string
	// Log receives the commands' output. Nil discards.
	Log io.Writer
}

// Binaries are the built programs and the source they came from.
type Binaries struct {
	Integration, Talosctl, Source string
	// Cached: nothing was built, the binaries of an earlier run fit.
	Cached bool
}

// Build returns Talos's integration test binary and talosctl at
// opts.Version, building them (with cgo off) only when they are missing or
// were built from another version, patch or Go.
func Build(ctx context.Context, opts BuildOptions) (Binaries, error) {
	// The go commands run in the source folder: every path they get is
	// absolute.
	root, err := filepath.Abs(opts.Dir)
	if err != nil {
		return Binaries{}, fmt.Errorf("talossuite: %w", err)
	}

	dir := filepath.Join(root, opts.Version)
	b := Binaries{
		Integration: filepath.Join(dir, "bin", "integration.test"),
		Talosctl:    filepath.Join(dir, "bin", "talosctl"),
		Source:      filepath.Join(dir, "src"),
	}
	stampPath := filepath.Join(dir, "bin", "stamp")
	stamp := fmt.Sprintf("%s %s patch=%s %s\n", TalosModule, opts.Version, PatchID(), runtime.Version())

	if old, err := os.ReadFile(stampPath); err == nil && string(old) == stamp && exists(b.Integration) && exists(b.Talosctl) && exists(b.Source) {
		b.Cached = true

		return b, nil
	}

	bs := builder{opts: opts}
	if err := bs.source(ctx, b.Source); err != nil {
		return b, err
	}

	tags := "integration,integration_api,integration_k8s"
	if err := bs.goCmd(ctx, b.Source, "test", "-c", "-tags", tags, "-o", b.Integration, "./internal/integration"); err != nil {
		return b, err
	}

	if err := bs.goCmd(ctx, b.Source, "build", "-o", b.Talosctl, "./cmd/talosctl"); err != nil {
		return b, err
	}

	return b, os.WriteFile(stampPath, []byte(stamp), 0o644) //nolint:gosec // not a secret
}

type builder struct{ opts BuildOptions }

func (bs builder) log() io.Writer { return defaults.Output(bs.opts.Log) }

// source puts a writable, patched copy of the module at dst.
func (bs builder) source(ctx context.Context, dst string) error {
	mod, err := bs.download(ctx)
	if err != nil {
		return err
	}

	if err := os.RemoveAll(dst); err != nil {
		return fmt.Errorf("talossuite: %w", err)
	}

	if err := copyTree(mod, dst); err != nil {
		return fmt.Errorf("talossuite: copying %s: %w", mod, err)
	}

	if err := os.Remove(filepath.Join(dst, "go.work")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("talossuite: %w", err)
	}

	if err := bs.goCmd(ctx, dst, "mod", "edit", "-dropreplace="+machineryModule); err != nil {
		return err
	}

	return Patch(dst)
}

// download fetches the module through the module proxy and returns its
// folder in the module cache.
func (bs builder) download(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, bs.goBin(), "mod", "download", "-json", TalosModule+"@"+bs.opts.Version)
	cmd.Stderr = bs.log()

	out, err := cmd.Output()

	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr == nil && info.Error != "" {
		return "", fmt.Errorf("talossuite: go mod download %s@%s: %s", TalosModule, bs.opts.Version, info.Error)
	}

	if err != nil {
		return "", fmt.Errorf("talossuite: go mod download %s@%s: %w", TalosModule, bs.opts.Version, err)
	}

	if info.Dir == "" {
		return "", fmt.Errorf("talossuite: go mod download %s@%s named no folder", TalosModule, bs.opts.Version)
	}

	return info.Dir, nil
}

// goCmd runs the go command in dir with cgo off, outside any workspace,
// free to add the go.sum lines the dropped replace needs.
func (bs builder) goCmd(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, bs.goBin(), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	cmd.Stdout, cmd.Stderr = bs.log(), bs.log()

	fmt.Fprintf(bs.log(), "+ (cd %s && go %s)\n", dir, strings.Join(args, " "))

	if err := cmd.Run(); err != nil {
		return fmt.Errorf("talossuite: go %s in %s: %w", strings.Join(args, " "), dir, err)
	}

	return nil
}

func (bs builder) goBin() string {
	if bs.opts.Go == "" {
		return "go"
	}

	return bs.opts.Go
}

// copyTree copies the regular files and folders of src to dst, writable by
// their owner (the module cache's files are read-only).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}

		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}

		target := filepath.Join(dst, rel)

		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			return copyFile(path, target)
		default:
			return nil // the module zip has no links or devices
		}
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()

	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}

	if _, err := io.Copy(out, in); err != nil {
		out.Close() //nolint:errcheck // the copy's error is the one to report

		return err
	}

	return out.Close()
}

func exists(path string) bool {
	_, err := os.Stat(path)

	return err == nil
}
