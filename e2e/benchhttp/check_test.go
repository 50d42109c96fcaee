package benchhttp

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
)

// checkSite fetches every path of each kind through s with curl (the
// single files four times) and compares each answer with its file; over
// nginx back ends it also checks, by their X-Backend header, that both
// served the mix and, when s picks by path, that a second pass over the
// mix went to the same back end for every path.
func checkSite(ctx context.Context, dir, root string, s *site) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var mixBy map[string]string
	for i, k := range kinds() {
		paths := k.paths
		if len(paths) == 1 {
			paths = []string{paths[0], paths[0], paths[0], paths[0]}
		}
		got, err := curlAll(ctx, dir, s.url, paths, s.close)
		if err != nil {
			return err
		}
		by, err := checkBodies(root, paths, got)
		if err != nil {
			return fmt.Errorf("%s: %w", k.name, err)
		}
		if i == 1 {
			mixBy = by
		}
	}
	if s.mirrors {
		return nil // mirror back ends do not name themselves
	}
	if err := checkSpread(mixBy); err != nil {
		return err
	}
	if !s.byPath {
		return nil
	}
	paths := kinds()[1].paths
	got, err := curlAll(ctx, dir, s.url, paths, s.close)
	if err != nil {
		return err
	}
	again, err := checkBodies(root, paths, got)
	if err != nil {
		return fmt.Errorf("mix, second pass: %w", err)
	}
	return samePicks(mixBy, again)
}

// checkSpread checks that both back ends, be1 and be2, served some of
// the paths of by (path → back end).
func checkSpread(by map[string]string) error {
	n := map[string]int{}
	for _, be := range by {
		n[be]++
	}
	if len(n) != 2 || n["be1"] == 0 || n["be2"] == 0 {
		return fmt.Errorf("the mix went to back ends %v, want be1 and be2", n)
	}
	return nil
}

// samePicks checks that every path went to the same back end in a as in
// b.
func samePicks(a, b map[string]string) error {
	for _, p := range slices.Sorted(maps.Keys(a)) {
		if a[p] != b[p] {
			return fmt.Errorf("%s went to %s, then to %s: want the same back end for a path", p, a[p], b[p])
		}
	}
	return nil
}
