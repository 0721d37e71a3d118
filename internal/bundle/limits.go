package bundle

// Limits of a release bundle, in one place. A bundle comes from outside the
// node (uploaded over the API, or a file an operator copied), so every
// size is bounded before anything is read into memory or written to disk.
const (
	// MaxManifest bounds manifest.json. It names seven files with a
	// digest each, a few hundred bytes; 64 KiB leaves room for later
	// fields and still refuses a manifest used to fill memory.
	MaxManifest = 64 << 10

	// MaxFile bounds one file of a bundle. The largest today is etcd's
	// binary or its image archive, about 40 MiB; 256 MiB is six times
	// that and still a size a node's disk takes twice (two slots).
	MaxFile = 256 << 20

	// MaxSize bounds a whole bundle: all its files together, as the
	// manifest declares them and as the archive holds them. Seven files
	// at most MaxFile each would be 1.75 GiB; a real bundle is about
	// 200 MiB, and 1 GiB keeps the two slots a node holds bounded.
	MaxSize = 1 << 30

	// MaxEntries bounds the entries of the archive read before it is
	// refused: the manifest and the seven files, with room for nothing
	// else (every other entry is refused anyway, this stops the loop).
	MaxEntries = 16
)
