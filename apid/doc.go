// Package apid is the node's only public API: an mTLS listener and an
// authentication, role and authorization interceptor chain in front of a
// transparent router to the local machined or to other nodes' apid.
package apid
