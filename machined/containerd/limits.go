package containerd

// maxSocketName is the room for a Unix socket's path: sun_path holds 108
// bytes with the terminating NUL on Linux, but containerd 1.6 refuses a
// socket path over 104 bytes (the BSD limit, which it checks on every
// platform) and exits. The margin keeps every node's socket where
// containerd will open it.
const maxSocketName = 100
