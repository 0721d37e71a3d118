package certs

import "strings"

// IsOSCAField reports whether a changed field path is the OS CA's
// (machine.ca and what it holds).
func IsOSCAField(path string) bool {
	return path == "machine.ca" || strings.HasPrefix(path, "machine.ca.")
}

// IsCARotationStep reports whether updated changes the OS CA of cur the
// way a rotation does, so that the change may apply live: the new CA was
// already accepted by cur (every peer was told to trust it first), and the
// CA it replaces is still accepted by updated (certificates it issued keep
// working until a later step drops it). Any other change of machine.ca
// would lock the node or its peers out, and stays refused. Both configs
// must have been validated.
func IsCARotationStep(cur, updated *MachineConfig) bool {
	if cur.CACertificate() == nil || updated.CACertificate() == nil || cur.AcceptedCAs() == nil || updated.AcceptedCAs() == nil {
		return false
	}

	// A control plane keeps holding the key of the CA it issues from;
	// a worker never holds one.
	if (cur.OSCA() == nil) != (updated.OSCA() == nil) {
		return false
	}

	return cur.AcceptedCAs().Contains(updated.CACertificate()) && updated.AcceptedCAs().Contains(cur.CACertificate())
}
