package content

import "slices"

// since joins the change sets of history from version v to cur, cur's
// own changes last: a path's change is what it was at v (absent if its
// first change adds it, else present) against what cur has now. It is
// false when no change set starts at v; v == cur's version is an empty
// change set.
func since(history []Changes, cur *Index, v uint64) (Changes, *Index, bool) {
	if v == cur.Version() {
		return Changes{From: v, To: v}, cur, true
	}
	i := slices.IndexFunc(history, func(ch Changes) bool { return ch.From == v })
	switch {
	case i < 0:
		return Changes{}, cur, false
	case i == len(history)-1:
		return history[i], cur, true
	}
	wasThere := map[string]bool{}
	for _, ch := range history[i:] {
		for _, c := range ch.Changes {
			if _, seen := wasThere[c.Path]; !seen {
				wasThere[c.Path] = c.Op != Add
			}
		}
	}
	paths := make([]string, 0, len(wasThere))
	for p := range wasThere {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	out := Changes{From: v, To: cur.Version()}
	for _, p := range paths {
		e, now := cur.Lookup(p)
		switch was := wasThere[p]; {
		case !was && now:
			out.Changes = append(out.Changes, Change{Op: Add, Entry: e})
		case was && now:
			out.Changes = append(out.Changes, Change{Op: Modify, Entry: e})
		case was && !now:
			out.Changes = append(out.Changes, Change{Op: Remove, Entry: Entry{Path: p}})
		}
	}
	return out, cur, true
}
