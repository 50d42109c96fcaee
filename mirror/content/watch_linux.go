package content

import (
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// watchMask is what inotify reports: a file or directory made, written,
// removed, renamed or changed in its attributes (an mtime set by rsync).
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_CLOSE_WRITE | unix.IN_MOVED_FROM |
	unix.IN_MOVED_TO | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW

// inotify watches directories of a root with one inotify instance, read
// through the runtime's poller so that Close ends the read.
type inotify struct {
	root   string
	max    int
	fd     int // f's descriptor (f.Fd would make it blocking)
	f      *os.File
	events chan struct{}
	done   chan struct{}

	mu      sync.Mutex
	watched map[string]bool
}

// newWatcher returns an inotify watcher of root, or noWatcher when inotify
// is not available (a container without it, the instance limit reached).
func newWatcher(root string, max int) watcher {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return noWatcher{}
	}
	w := &inotify{root: root, max: max, fd: fd, f: os.NewFile(uintptr(fd), "inotify"),
		events: make(chan struct{}, 1), done: make(chan struct{}), watched: map[string]bool{}}
	go w.read()
	return w
}

// Watch adds watches of dirs not watched yet, up to w.max in all. A
// removed directory's watch ends by itself; its name is watched again if
// a later scan finds it.
func (w *inotify) Watch(dirs []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	live := make(map[string]bool, len(dirs))
	for _, d := range dirs {
		live[d] = true
	}
	for d := range w.watched {
		if !live[d] {
			delete(w.watched, d)
		}
	}
	for _, d := range dirs {
		if len(w.watched) >= w.max {
			return
		}
		if w.watched[d] {
			continue
		}
		if _, err := unix.InotifyAddWatch(w.fd, filepath.Join(w.root, d), watchMask); err == nil {
			w.watched[d] = true
		}
	}
}

// read turns whatever inotify reads into one pending value on events.
func (w *inotify) read() {
	defer close(w.done)
	buf := make([]byte, 64<<10)
	for {
		if _, err := w.f.Read(buf); err != nil {
			return
		}
		select {
		case w.events <- struct{}{}:
		default:
		}
	}
}

// Events has a value after any change in a watched directory.
func (w *inotify) Events() <-chan struct{} { return w.events }

// Close ends the watches and the read.
func (w *inotify) Close() error {
	err := w.f.Close()
	<-w.done
	return err
}
