package svc

import (
	"io"
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

type server struct{ log *slog.Logger }

func (s *server) init(w io.Writer) {
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}

	if w == nil {
		w = io.Discard
	}
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}

	return l
}

func keep(err error, w io.Writer) {
	if w == nil {
		w = nil
	}
}
