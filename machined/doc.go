// Package machined runs a node: its boot sequence, the lifecycle of its
// services and the MachineService API that apid forwards to.
package machined
