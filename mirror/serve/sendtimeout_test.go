package serve

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/transmirror/transmirror/probe/probetest"
)

// deadlineRecorder is a ResponseWriter with a ReadFrom and a
// SetWriteDeadline (what http.ResponseController looks for) that records
// what it is given.
type deadlineRecorder struct {
	header    http.Header
	writes    []int       // the length of each Write
	reads     []io.Reader // the src of each ReadFrom
	deadlines int
	n         int64
}

func (d *deadlineRecorder) Header() http.Header { return d.header }
func (d *deadlineRecorder) WriteHeader(int)     {}
func (d *deadlineRecorder) Write(b []byte) (int, error) {
	if d.deadlines == 0 {
		return 0, errors.New("a write before any deadline")
	}
	d.writes = append(d.writes, len(b))
	d.n += int64(len(b))
	return len(b), nil
}

func (d *deadlineRecorder) ReadFrom(src io.Reader) (int64, error) {
	if d.deadlines == 0 {
		return 0, errors.New("a ReadFrom before any deadline")
	}
	lr, _ := src.(*io.LimitedReader)
	d.reads = append(d.reads, src)
	if lr != nil {
		d.reads[len(d.reads)-1] = lr.R
	}
	n, err := io.Copy(io.Discard, src)
	d.n += n
	return n, err
}

func (d *deadlineRecorder) SetWriteDeadline(time.Time) error {
	d.deadlines++
	return nil
}

// TestSendWriterChunks: every write and every sendfile is cut into
// pieces of at most sendChunk with a deadline each, and the file under
// http.ServeContent's LimitedReader reaches the underlying ReadFrom as it
// is, one level of limit only, so that sendfile still takes it.
func TestSendWriterChunks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	const size = 3*sendChunk + 123
	if err := os.WriteFile(path, make([]byte, size+1000), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		do         func(w *sendWriter) (int64, error)
		n          int64
		pieces     int
		fileReads  bool
		wantWrites []int
	}{
		{"a large Write", func(w *sendWriter) (int64, error) {
			n, err := w.Write(make([]byte, size))
			return int64(n), err
		}, size, 4, false, []int{sendChunk, sendChunk, sendChunk, 123}},
		{"an empty Write", func(w *sendWriter) (int64, error) {
			n, err := w.Write(nil)
			return int64(n), err
		}, 0, 1, false, []int{0}},
		{"ServeContent's LimitedReader of a file", func(w *sendWriter) (int64, error) {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			lr := &io.LimitedReader{R: f, N: size}
			n, err := w.ReadFrom(lr)
			if lr.N != 0 {
				t.Errorf("LimitedReader left with N = %d, want 0", lr.N)
			}
			return n, err
		}, size, 4, true, nil},
		{"a file without a limit, to its end", func(w *sendWriter) (int64, error) {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			return w.ReadFrom(f)
		}, size + 1000, 4, true, nil},
	}
	t.Run("pieces in quick succession share a deadline", func(t *testing.T) {
		rec := &deadlineRecorder{header: http.Header{}}
		w := &sendWriter{ResponseWriter: rec, dl: rec, send: time.Minute}
		for range 3 {
			if _, err := w.Write(make([]byte, 3*sendChunk)); err != nil {
				t.Fatal(err)
			}
		}
		if len(rec.writes) != 9 || rec.deadlines != 1 {
			t.Errorf("%d pieces with %d deadlines, want 9 with one (set again only after send/16)", len(rec.writes), rec.deadlines)
		}
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &deadlineRecorder{header: http.Header{}}
			// A send timeout too short to skip a deadline: every piece
			// gets one.
			w := &sendWriter{ResponseWriter: rec, dl: rec, send: time.Nanosecond}
			n, err := tc.do(w)
			if err != nil || n != tc.n || rec.n != tc.n {
				t.Fatalf("wrote %d (%d underneath), %v; want %d", n, rec.n, err, tc.n)
			}
			pieces := len(rec.writes) + len(rec.reads)
			if pieces != tc.pieces || rec.deadlines != pieces {
				t.Errorf("%d pieces with %d deadlines, want %d of each", pieces, rec.deadlines, tc.pieces)
			}
			if tc.wantWrites != nil && fmt.Sprint(rec.writes) != fmt.Sprint(tc.wantWrites) {
				t.Errorf("writes %v, want %v", rec.writes, tc.wantWrites)
			}
			for i, src := range rec.reads {
				if _, ok := src.(*os.File); tc.fileReads && !ok {
					t.Errorf("ReadFrom %d got a %T under its limit, want the *os.File (sendfile)", i, src)
				}
			}
		})
	}
}

// TestServerSendTimeout: with a real client on loopback, one that stops
// reading a large file is cut off after the send timeout, and its handler
// returns; one that reads slowly but steadily for longer than the send
// timeout gets the whole file.
func TestServerSendTimeout(t *testing.T) {
	root := t.TempDir()
	const big = 64 << 20 // more than loopback's socket buffers hold
	const steady = 40 << 20
	for name, size := range map[string]int64{"big.iso": big, "steady.iso": steady} {
		f, err := os.Create(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := os.Truncate(filepath.Join(root, name), size); err != nil {
			t.Fatal(err)
		}
	}
	files, err := NewFileServer(root, FileServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { files.Close() })

	type served struct {
		path    string
		elapsed time.Duration
	}
	done := make(chan served, 16)
	const send = 1500 * time.Millisecond
	reg := prometheus.NewRegistry()
	base := startServer(t, ServerOptions{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		files.ServeHTTP(w, r)
		done <- served{r.URL.Path, time.Since(start)}
	}), SendTimeout: send, Registerer: reg})
	cutOff := func() float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "transmirror_mirror_send_timeouts_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		t.Fatal("no transmirror_mirror_send_timeouts_total")
		return 0
	}
	addr := strings.TrimPrefix(base, "http://")
	dial := func(t *testing.T) *net.TCPConn {
		t.Helper()
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		tc := c.(*net.TCPConn)
		if err := tc.SetReadBuffer(64 << 10); err != nil {
			t.Fatal(err)
		}
		return tc
	}
	waitServed := func(t *testing.T, path string) time.Duration {
		t.Helper()
		select {
		case s := <-done:
			if s.path != path {
				t.Fatalf("served %s, want %s", s.path, path)
			}
			return s.elapsed
		case <-time.After(30 * time.Second):
			t.Fatalf("%s still being served after 30s", path)
		}
		return 0
	}

	t.Run("a client that stops reading is cut off", func(t *testing.T) {
		c := dial(t)
		if _, err := io.WriteString(c, "GET /big.iso HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		el := waitServed(t, "/big.iso")
		if el < send {
			t.Errorf("handler returned after %v, before the send timeout %v", el, send)
		}
		// Counted once the handler chain has returned, just after the
		// handler above said it had.
		probetest.Until(t, 5*time.Second, func() string {
			if n := cutOff(); n != 1 {
				return fmt.Sprintf("send_timeouts_total 1: %g", n)
			}
			return ""
		})

		// The client finds the connection closed short of the file.
		if err := c.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the connection is still open")
		}
		if n >= big {
			t.Errorf("the client got %d bytes, the whole file", n)
		}
		t.Logf("cut off after %v; the client had %d of %d bytes", el.Round(time.Millisecond), n, int64(big))
	})

	t.Run("a slow steady reader gets the whole file", func(t *testing.T) {
		c := dial(t)
		if _, err := io.WriteString(c, "GET /steady.iso HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if err := c.SetReadDeadline(time.Now().Add(60 * time.Second)); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReaderSize(c, 64<<10)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		// 64 KiB every 5 ms at most: 40 MiB take at least 3.2 s to read,
		// and the server at least that less what the buffers hold.
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		var got int64
		buf := make([]byte, 64<<10)
		for {
			<-tick.C
			n, err := io.ReadFull(resp.Body, buf)
			got += int64(n)
			if err != nil {
				break
			}
		}
		el := waitServed(t, "/steady.iso")
		if got != steady {
			t.Fatalf("got %d of %d bytes", got, int64(steady))
		}
		if el <= send {
			t.Errorf("served in %v, not longer than the send timeout %v: the test shows nothing", el, send)
		}
		if got := cutOff(); got != 1 {
			t.Errorf("send_timeouts_total %g after a whole download, want still 1", got)
		}
		t.Logf("served %d bytes in %v with a send timeout of %v", got, el.Round(time.Millisecond), send)
	})
}

// BenchmarkSendTimeout serves a small file over loopback to a keep-alive
// client with the send timeout off and on: what arming a deadline per
// write costs a request.
func BenchmarkSendTimeout(b *testing.B) {
	tr := newTree(b)
	for _, send := range []time.Duration{0, time.Minute} {
		b.Run(fmt.Sprintf("send=%v", send), func(b *testing.B) {
			base := startServer(b, ServerOptions{Handler: tr.fileServer(b, FileServerOptions{}), SendTimeout: send})
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Get(base + "/data.bin")
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// BenchmarkSendTimeoutLarge serves a 64 MiB file over loopback with the
// send timeout off and on: what cutting sendfile into sendChunk pieces
// costs a large download.
func BenchmarkSendTimeoutLarge(b *testing.B) {
	root := b.TempDir()
	const size = 64 << 20
	f, err := os.Create(filepath.Join(root, "big.iso"))
	if err != nil {
		b.Fatal(err)
	}
	f.Close()
	if err := os.Truncate(filepath.Join(root, "big.iso"), size); err != nil {
		b.Fatal(err)
	}
	files, err := NewFileServer(root, FileServerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { files.Close() })
	for _, send := range []time.Duration{0, time.Minute} {
		b.Run(fmt.Sprintf("send=%v", send), func(b *testing.B) {
			base := startServer(b, ServerOptions{Handler: files, SendTimeout: send})
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			b.SetBytes(size)
			for b.Loop() {
				resp, err := client.Get(base + "/big.iso")
				if err != nil {
					b.Fatal(err)
				}
				if n, _ := io.Copy(io.Discard, resp.Body); n != size {
					b.Fatalf("got %d bytes", n)
				}
				resp.Body.Close()
			}
		})
	}
}
