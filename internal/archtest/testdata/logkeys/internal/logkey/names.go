package logkey

const Peer = "peer"
