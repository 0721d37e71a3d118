package containerd

// maxSocketName is the room for a Unix socket's path (sun_path, 108 bytes
// with the terminating NUL on Linux).
const maxSocketName = 107
