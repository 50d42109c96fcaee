package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/transmirror/transmirror/dnsd/internal/atomicfile"
	"github.com/transmirror/transmirror/scheduler"
)

// scopeStateVersion is the version of the scope estimates file.
const scopeStateVersion = 1

// Bounds of the scope estimates file.
const (
	// maxScopeStateBytes is the largest file LoadScopes reads: about 100
	// bytes per scope, for 16 groups of 2¹⁶ scopes.
	maxScopeStateBytes = 128 << 20
	// maxScopeAge: scopes not seen for this long are neither saved nor
	// loaded.
	maxScopeAge = 24 * time.Hour
	// DefaultScopeSaveInterval is how often RunScopeSaver writes the file.
	DefaultScopeSaveInterval = 30 * time.Second
)

// scopeFile is the scope estimates file: per group, what its ScopeRates
// knows (scheduler.ScopeRatesState).
type scopeFile struct {
	Version int                   `json:"version"`
	Saved   time.Time             `json:"saved"`
	Groups  map[string]scopeGroup `json:"groups"`
}

type scopeGroup struct {
	// Total is the group's request rate, requests per second.
	Total      float64 `json:"total"`
	Calibrated bool    `json:"calibrated"`
	// Scopes are least recently seen first.
	Scopes []scopeEntry `json:"scopes"`
}

type scopeEntry struct {
	Prefix netip.Prefix `json:"prefix"`
	Rate   float64      `json:"rate"`
	Copies float64      `json:"copies"`
	Seen   time.Time    `json:"seen"`
}

// ScopesPath returns the scope estimates file that goes with a state
// file: beside it, its name without the extension plus ".scopes.json"
// (dnsd-state.json → dnsd-state.scopes.json); "" for no state file.
func ScopesPath(stateFile string) string {
	if stateFile == "" {
		return ""
	}
	base := strings.TrimSuffix(filepath.Base(stateFile), filepath.Ext(stateFile))
	return filepath.Join(filepath.Dir(stateFile), base+".scopes.json")
}

// SaveScopes writes the per-scope estimates of every group to path,
// atomically: at most the dispatcher's MaxScopes scopes per group, those
// seen in the last day.
func (d *Dispatcher) SaveScopes(path string) error {
	now := d.now()
	f := scopeFile{Version: scopeStateVersion, Saved: now, Groups: map[string]scopeGroup{}}
	for name, g := range d.groups() {
		st := g.rates.State(now)
		sg := scopeGroup{Total: st.Total, Calibrated: st.Calibrated, Scopes: make([]scopeEntry, 0, len(st.Scopes))}
		for _, e := range st.Scopes {
			if now.Sub(e.Seen) > maxScopeAge {
				continue
			}
			sg.Scopes = append(sg.Scopes, scopeEntry{Prefix: e.Prefix, Rate: e.Rate, Copies: e.Copies, Seen: e.Seen})
		}
		f.Groups[name] = sg
	}
	data, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("dispatch: scope estimates: %w", err)
	}
	if err := atomicfile.WriteFile(path, append(data, '\n')); err != nil {
		return fmt.Errorf("dispatch: scope estimates: %w", err)
	}
	return nil
}

// LoadScopes reads the per-scope estimates saved in path into the groups
// served now (estimates of other groups are dropped). A missing file is no
// error; an unreadable or corrupt one is, and loads nothing: the caller
// logs it and starts with empty estimates, which the next save replaces.
func (d *Dispatcher) LoadScopes(path string) error {
	fh, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dispatch: scope estimates: %w", err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxScopeStateBytes+1))
	if err != nil {
		return fmt.Errorf("dispatch: scope estimates: %w", err)
	}
	if len(data) > maxScopeStateBytes {
		return fmt.Errorf("dispatch: scope estimates %s: larger than %d bytes", path, maxScopeStateBytes)
	}
	var f scopeFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return fmt.Errorf("dispatch: scope estimates %s is corrupt: %w", path, err)
	}
	if f.Version != scopeStateVersion {
		return fmt.Errorf("dispatch: scope estimates %s: version %d, want %d", path, f.Version, scopeStateVersion)
	}
	now := d.now()
	groups := d.groups()
	for name, sg := range f.Groups {
		g := groups[name]
		if g == nil {
			continue
		}
		st := scheduler.ScopeRatesState{Total: sg.Total, Calibrated: sg.Calibrated, Scopes: make([]scheduler.ScopeEstimate, 0, len(sg.Scopes))}
		for _, e := range sg.Scopes {
			if now.Sub(e.Seen) > maxScopeAge {
				continue
			}
			st.Scopes = append(st.Scopes, scheduler.ScopeEstimate{Prefix: e.Prefix, Rate: e.Rate, Copies: e.Copies, Seen: e.Seen})
		}
		g.rates.Restore(st, now)
	}
	return nil
}

// RunScopeSaver writes the scope estimates to path() every interval
// (DefaultScopeSaveInterval when ≤ 0) and once more when ctx ends; an
// empty path (no state file configured) writes nothing. A failed write is
// logged once per failing spell; RunScopeSaver returns nil when ctx ends.
func (d *Dispatcher) RunScopeSaver(ctx context.Context, path func() string, interval time.Duration) error {
	if interval <= 0 {
		interval = DefaultScopeSaveInterval
	}
	failing := false
	save := func() {
		p := path()
		if p == "" {
			return
		}
		err := d.SaveScopes(p)
		switch {
		case err != nil && !failing:
			d.log.Error("cannot save the scope estimates", "path", p, "err", err)
		case err == nil && failing:
			d.log.Info("scope estimates saved again", "path", p)
		}
		failing = err != nil
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			save()
			return nil
		case <-t.C:
			save()
		}
	}
}
