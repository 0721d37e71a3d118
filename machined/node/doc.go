// Package node is machined's node controller: it runs the boot sequence,
// keeps the node's certificates fresh, hands each service its resources over
// a socket of its own, serves the MachineService for apid, and runs apid and
// trustd through the service framework.
package node
