package h1

import "net/http"

// Leave is the hook of AfterLeave on one request.
type Leave struct{ cr *connReader }

// AfterLeave arranges for f to run, in a goroutine of its own, when the
// client of the request that w answers leaves before the response is
// done (at once when it has left already): what context.AfterFunc on
// the request's context does, without its allocations. w is an h1
// response or wraps one (Unwrap, as for http.ResponseController); for
// any other AfterLeave does nothing and returns nil. One hook per
// request: a second replaces the first.
func AfterLeave(w http.ResponseWriter, f func()) *Leave {
	for {
		switch x := w.(type) {
		case *response:
			return x.c.cr.afterLeave(f)
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return nil
		}
	}
}

// Stop removes the hook; false: f has run or is running.
func (l *Leave) Stop() bool {
	cr := l.cr
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if cr.onLeave == nil {
		return false
	}
	cr.onLeave = nil
	return true
}

func (cr *connReader) afterLeave(f func()) *Leave {
	cr.mu.Lock()
	left := cr.left
	if !left {
		cr.onLeave = f
	}
	cr.mu.Unlock()
	if left {
		go f()
	}
	cr.leave.cr = cr
	return &cr.leave
}
