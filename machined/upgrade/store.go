package upgrade

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/aegis-os/aegis/internal/atomicfile"
)

// Store keeps a node's State in DIR/state.json and its slots in DIR/<name>.
type Store struct {
	// Dir is the upgrade folder of the node's state directory.
	Dir string
}

// SlotDir is the directory of the slot named name.
func (st Store) SlotDir(name string) string { return filepath.Join(st.Dir, name) }

func (st Store) path() string { return filepath.Join(st.Dir, "state.json") }

// Load reads the recorded state; ok is false when the node has never
// been upgraded (no file).
func (st Store) Load() (s State, ok bool, err error) {
	f, err := os.Open(st.path())
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, false, nil
	}

	if err != nil {
		return State{}, false, fmt.Errorf("upgrade: %w", err)
	}
	defer f.Close()

	raw, err := io.ReadAll(io.LimitReader(f, MaxStateFile+1))
	if err != nil {
		return State{}, false, fmt.Errorf("upgrade: %w", err)
	}

	if len(raw) > MaxStateFile {
		return State{}, false, fmt.Errorf("upgrade: %s is over %d bytes; it is damaged: remove it to boot the installed version", st.path(), MaxStateFile)
	}

	// Fields this version does not know are ignored: the file may have
	// been written by a later version, and this one is what a rollback
	// runs. A field therefore keeps its name and its type for good; a
	// change of meaning is a new field.
	if err := json.Unmarshal(raw, &s); err != nil || s.Active.BinDir == "" {
		return State{}, false, fmt.Errorf("upgrade: %s is damaged (%v); remove it to boot the installed version", st.path(), err)
	}

	return s, true, nil
}

// Save records s, replacing the file atomically (mode 0600).
func (st Store) Save(s State) error {
	raw, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}

	if err := atomicfile.Write(st.path(), raw, 0o600, atomicfile.Options{Overwrite: true}); err != nil {
		return fmt.Errorf("upgrade: recording the slots: %w", err)
	}

	return nil
}
