//go:build !linux

package content

// newWatcher is noWatcher where there is no inotify.
func newWatcher(string, int) watcher { return noWatcher{} }
