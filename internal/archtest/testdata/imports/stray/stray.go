package stray
