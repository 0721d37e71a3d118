package main

import (
	"embed"
	"path"
)

// dist holds the files of the packages that are not built: machined's
// systemd unit, its environment file and the maintainer scripts.
//
//go:embed dist
var dist embed.FS

// Where the packages put things on the installed system (Debian's layout;
// merged /usr). Binaries share /usr/bin, as `make install` puts them in
// PREFIX/bin: machined finds apid, trustd and etcd beside its own binary
// and the image archives in ../lib/aegis/images.
const (
	binDir       = "/usr/bin"
	imageDir     = "/usr/lib/aegis/images"
	unitDir      = "/usr/lib/systemd/system"
	configDir    = "/etc/aegis"
	defaultsFile = "/etc/default/machined"
	manDir       = "/usr/share/man"
	bashDir      = "/usr/share/bash-completion/completions"
	zshDir       = "/usr/share/zsh/vendor-completions"
	fishDir      = "/usr/share/fish/vendor_completions.d"
	docDir       = "/usr/share/doc"
)

// The packages.
const (
	// clientPackage is aegisctl alone, for an operator's workstation.
	clientPackage = "aegisctl"
	// nodePackage is what a node runs: machined and the services it
	// starts, their images and machined's unit.
	nodePackage = "aegis-node"
)

// daemons are the node package's binaries with a man page (section 8)
// and a bash completion; etcd is etcd's own, run by machined alone.
var daemons = []string{"machined", "apid", "trustd"}

// nodeBinaries are the node package's binaries.
var nodeBinaries = append(append([]string(nil), daemons...), "etcd")

// images are the archives machined imports into its containerd.
var images = []string{"apid", "trustd", "etcd"}

// units are the systemd units the node package installs, under unitDir.
var units = []string{"machined.service"}

// unitNames are the units systemd-analyze verifies.
func unitNames() []string { return units }

// unitPath is where unit is installed.
func unitPath(unit string) string { return path.Join(unitDir, unit) }
