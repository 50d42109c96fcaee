package group

import (
	"context"
	"log/slog"
	"time"
)

// every calls f at once and then every interval until ctx is done.
func every(ctx context.Context, interval time.Duration, f func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		f(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// spell logs a repeated action (a push, a view refresh) once per failing
// spell: the first failure at warn, the recovery at info with how many
// failures there were. Failures while ctx is done (shutting down) are not
// failures of the other side. Not safe for concurrent use: the caller
// serialises the action.
type spell struct {
	log     *slog.Logger
	what    string // "load push", "group view refresh"
	target  string // the URL, for the log
	failing int    // consecutive failures
}

// note records the outcome of one attempt.
func (s *spell) note(ctx context.Context, result string, err error) {
	switch {
	case err == nil && s.failing > 0:
		s.log.Info(s.what+" recovered", "url", s.target, "failures", s.failing)
		s.failing = 0
	case err != nil && ctx.Err() != nil:
	case err != nil:
		if s.failing == 0 {
			s.log.Warn(s.what+" failing", "url", s.target, "result", result, "err", err)
		}
		s.failing++
	}
}
