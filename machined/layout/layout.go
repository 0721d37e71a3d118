// Package layout names the places of a node's state directory: the
// sockets between machined, apid and trustd, the logs, the certificates and
// etcd's data. It is the one place those paths are built; machined, the
// daemons it starts and the tests all read them from here.
package layout

import "path/filepath"

// Layout names the places of a node's state directory. Nothing of the node
// lives outside it.
type Layout struct {
	State string
}

// MachinedSocket is where apid forwards API calls: the MachineService and
// Aegis's own services, authorized again from the roles apid passes.
func (l Layout) MachinedSocket() string {
	return filepath.Join(l.State, "run", "machined", "machined.sock")
}

// APIDRun is apid's own socket folder, the only one its container sees.
func (l Layout) APIDRun() string { return filepath.Join(l.State, "run", "apid") }

// APIDResources is apid's socket for its view of the node's resources.
func (l Layout) APIDResources() string { return filepath.Join(l.APIDRun(), "node.sock") }

// APIDHealth is the socket apid serves its health service on for
// machined's probe (apid --health-socket).
func (l Layout) APIDHealth() string { return filepath.Join(l.APIDRun(), "health.sock") }

// TrustdRun is trustd's own socket folder: its resources socket and the
// token API it serves.
func (l Layout) TrustdRun() string { return filepath.Join(l.State, "run", "trustd") }

// TrustdResources is trustd's socket for its view of the node's resources.
func (l Layout) TrustdResources() string { return filepath.Join(l.TrustdRun(), "node.sock") }

// TrustdState is trustd's own state: its token store and audit files.
func (l Layout) TrustdState() string { return filepath.Join(l.State, "trustd") }

// TokensSocket is where trustd serves the token API for machined to forward to.
func (l Layout) TokensSocket() string { return filepath.Join(l.TrustdRun(), "tokens.sock") }

// LogDir holds the logs of the services.
func (l Layout) LogDir() string { return filepath.Join(l.State, "logs") }

// ServiceLog is the log file of one service.
func (l Layout) ServiceLog(id string) string { return filepath.Join(l.LogDir(), id+".log") }

// EtcdDir holds etcd's data, certificates and member ID on a control plane.
func (l Layout) EtcdDir() string { return filepath.Join(l.State, "etcd") }

// PKIDir holds the node's own certificates and keys, mode 0600 in a 0700
// directory, kept so that a reboot serves the API at once (see usableHeld).
func (l Layout) PKIDir() string { return filepath.Join(l.State, "pki") }

// NodeCertificate is where the node keeps its certificate of kind
// ("server", "impersonator") and the key.
func (l Layout) NodeCertificate(kind string) (crt, key string) {
	return filepath.Join(l.PKIDir(), kind+".crt"), filepath.Join(l.PKIDir(), kind+".key")
}

// RevocationList is where the node keeps the last revocation list it
// learned, so that a restart, and a worker that cannot reach any control
// plane, keeps enforcing it.
func (l Layout) RevocationList() string { return filepath.Join(l.State, "revocations.json") }

// PreviousConfig is the machine config a config apply replaced, kept as
// it was (mode 0600: it holds the token and a control plane's CA keys).
func (l Layout) PreviousConfig() string { return filepath.Join(l.State, "config.previous.yaml") }

// UpgradeDir holds the node's installed versions: the slots' record
// (state.json), the slot directories and the uploaded bundles.
func (l Layout) UpgradeDir() string { return filepath.Join(l.State, "upgrade") }

// UploadDir holds the release bundles uploaded to the node, by digest.
func (l Layout) UploadDir() string { return filepath.Join(l.UpgradeDir(), "uploads") }
