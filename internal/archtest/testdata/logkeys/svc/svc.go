package svc

import (
	"log/slog"

	"example.com/fixture/internal/logkey"
)

const localKey = "mine"

const aliasKey = logkey.Peer

func run(log *slog.Logger, addr string) {
	log.Info("fine", slog.String(logkey.Peer, addr), logkey.Peer, addr, aliasKey, addr)
	log.Info("literal attr", slog.String("peer", addr))
	log.Warn("literal pair", "peer", addr)
	log.With(slog.Int(localKey, 1)).Error("local constant")
	_ = slog.Attr{Key: "peer", Value: slog.StringValue(addr)}
}
