package svc

import (
	"log/slog"
	"time"
)

type Config struct {
	Logger  *slog.Logger
	Timeout time.Duration
}

func New(cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}

	if cfg.Timeout == 0 {
		cfg.Timeout = time.Second
	}

	return nil
}
