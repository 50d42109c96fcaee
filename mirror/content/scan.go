package content

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
)

// readBatch is how many directory entries a scan reads at a time.
const readBatch = 1024

// scanResult is what one scan found: the files in path order, the
// directories (for the watcher) and how many entries it skipped.
type scanResult struct {
	files   []Entry
	dirs    []string // "." and every directory below it, relative to the root
	skipped int      // names that are not valid paths, unreadable directories
}

// walk is one scan of a root by a bounded number of workers that share a
// queue of directories.
type walk struct {
	ctx      context.Context
	root     *os.Root
	maxFiles int

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []string
	pending int // directories queued or being read
	res     scanResult
	err     error
}

// scanTree lists the regular files under root with workers goroutines, at
// most maxFiles of them; hint is how many it expects (the last scan's). Symbolic links count when they resolve to a
// regular file inside the root (os.Root refuses the others) and are never
// followed to a directory; other file types are skipped.
func scanTree(ctx context.Context, root string, workers, maxFiles, hint int) (scanResult, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return scanResult{}, fmt.Errorf("content: %w", err)
	}
	defer r.Close()
	w := &walk{ctx: ctx, root: r, maxFiles: maxFiles, queue: []string{"."}, pending: 1}
	w.res.files = make([]Entry, 0, hint+hint/32) // no doubling when the tree grew a little
	w.cond = sync.NewCond(&w.mu)
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(w.work)
	}
	wg.Wait()
	if w.err != nil {
		return scanResult{}, w.err
	}
	slices.SortFunc(w.res.files, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	return w.res, nil
}

// work takes directories off the queue until none is left or one failed.
func (w *walk) work() {
	for {
		w.mu.Lock()
		for len(w.queue) == 0 && w.pending > 0 && w.err == nil {
			w.cond.Wait()
		}
		if w.pending == 0 || w.err != nil {
			w.mu.Unlock()
			return
		}
		dir := w.queue[len(w.queue)-1]
		w.queue = w.queue[:len(w.queue)-1]
		w.mu.Unlock()
		files, dirs, skipped, err := w.readDir(dir)
		w.mu.Lock()
		w.merge(dir, files, dirs, skipped, err)
		w.cond.Broadcast()
		w.mu.Unlock()
	}
}

// merge records what readDir found in dir (w.mu held).
func (w *walk) merge(dir string, files []Entry, dirs []string, skipped int, err error) {
	w.pending--
	if err == nil {
		err = w.ctx.Err()
	}
	if err != nil {
		w.err = errors.Join(w.err, err)
		return
	}
	w.res.dirs = append(w.res.dirs, dir)
	w.res.files = append(w.res.files, files...)
	w.res.skipped += skipped
	if w.maxFiles > 0 && len(w.res.files) > w.maxFiles {
		w.err = fmt.Errorf("%w: more than %d files under the root", ErrTooMany, w.maxFiles)
		return
	}
	w.queue = append(w.queue, dirs...)
	w.pending += len(dirs)
}

// readDir lists dir: its regular files and its subdirectories. A
// subdirectory that cannot be read is skipped; the root must be readable.
func (w *walk) readDir(dir string) (files []Entry, dirs []string, skipped int, err error) {
	f, err := w.root.Open(dir)
	if err != nil {
		if dir == "." {
			return nil, nil, 0, fmt.Errorf("content: %w", err)
		}
		return nil, nil, 1, nil
	}
	defer f.Close()
	for {
		des, err := f.ReadDir(readBatch)
		for _, de := range des {
			p := path.Join(dir, de.Name())
			if checkPath(p) != nil {
				skipped++
				continue
			}
			e, isDir, ok := w.entry(p, de)
			switch {
			case isDir:
				dirs = append(dirs, p)
			case ok:
				files = append(files, e)
			}
		}
		if err == io.EOF || len(des) == 0 {
			return files, dirs, skipped, nil
		}
		if err != nil {
			return files, dirs, skipped + 1, nil
		}
	}
}

// entry returns the file at p, or whether it is a directory to descend
// into; ok is false for anything else.
func (w *walk) entry(p string, de fs.DirEntry) (e Entry, isDir, ok bool) {
	var fi fs.FileInfo
	var err error
	switch t := de.Type(); {
	case t.IsDir():
		return Entry{}, true, false
	case t.IsRegular():
		fi, err = de.Info()
	case t&fs.ModeSymlink != 0:
		fi, err = w.root.Stat(p) // follows the link, never out of the root
	default:
		return Entry{}, false, false
	}
	if err != nil || !fi.Mode().IsRegular() {
		return Entry{}, false, false
	}
	return Entry{Path: p, Size: fi.Size(), MTime: fi.ModTime().UnixNano()}, false, true
}

// indexOf builds the index at version of a scan's sorted files.
func indexOf(version uint64, files []Entry) (*Index, error) {
	b := newBuilder(len(files))
	total := 0
	for _, e := range files {
		total += len(e.Path)
	}
	b.arena.Grow(total)
	for _, e := range files {
		if b.arena.Len()+len(e.Path) > math.MaxUint32 {
			return nil, fmt.Errorf("%w: more than 4 GiB of paths", ErrTooMany)
		}
		b.add(e)
	}
	return b.index(version), nil
}
