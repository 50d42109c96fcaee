package group

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/transmirror/transmirror/probe"
)

// countingDNSD answers every request with code and counts them.
type countingDNSD struct {
	srv  *httptest.Server
	code atomic.Int32
	n    atomic.Int64
}

func newCountingDNSD(t *testing.T, code int, body func(http.ResponseWriter)) *countingDNSD {
	t.Helper()
	d := &countingDNSD{}
	d.code.Store(int32(code))
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.n.Add(1)
		if c := int(d.code.Load()); c/100 != 2 {
			http.Error(w, "down", c)
			return
		}
		body(w)
	}))
	t.Cleanup(d.srv.Close)
	return d
}

func TestPushSeveralURLs(t *testing.T) {
	accept := func(w http.ResponseWriter) { w.WriteHeader(http.StatusAccepted) }
	tests := []struct {
		name       string
		one        bool
		codes      [2]int   // each dnsd's answer
		wantN      [2]int64 // requests each dnsd got from two pushes
		wantOK     [2]float64
		wantFailed bool
	}{
		{"all: every dnsd gets every report", false, [2]int{202, 202}, [2]int64{2, 2}, [2]float64{2, 2}, false},
		{"all: one down is an error, the other still gets them", false, [2]int{503, 202}, [2]int64{2, 2}, [2]float64{0, 2}, true},
		{"one: the first only while it accepts", true, [2]int{202, 202}, [2]int64{2, 0}, [2]float64{2, 0}, false},
		{"one: past a failing first, then the second first", true, [2]int{503, 202}, [2]int64{1, 2}, [2]float64{0, 2}, false},
		{"one: both down", true, [2]int{503, 503}, [2]int64{2, 2}, [2]float64{0, 0}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := [2]*countingDNSD{newCountingDNSD(t, tt.codes[0], accept), newCountingDNSD(t, tt.codes[1], accept)}
			p, err := NewPusher(PusherOptions{
				URLs: []string{d[0].srv.URL, d[1].srv.URL}, One: tt.one, Group: testGroup, Member: "a", Secret: []byte("s"),
				Snapshot: func(now time.Time) probe.Report { return probe.Report{Group: testGroup, Member: "a", Time: now} },
			})
			if err != nil {
				t.Fatal(err)
			}
			var failed bool
			for range 2 {
				failed = p.Push(context.Background()) != nil
			}
			if failed != tt.wantFailed {
				t.Errorf("last push failed: %v, want %v", failed, tt.wantFailed)
			}
			for i, label := range []string{"0", "1"} {
				if n := d[i].n.Load(); n != tt.wantN[i] {
					t.Errorf("dnsd %d got %d pushes, want %d", i, n, tt.wantN[i])
				}
				if n := testutil.ToFloat64(p.pushes.WithLabelValues(label, pushOK)); n != tt.wantOK[i] {
					t.Errorf("pushes_total{dnsd=%q,result=ok} = %g, want %g", label, n, tt.wantOK[i])
				}
			}
		})
	}
}

func TestViewWatcherFailover(t *testing.T) {
	view := func(w http.ResponseWriter) { _ = jsonEncode(w, testView(nil)) }
	d := [2]*countingDNSD{newCountingDNSD(t, 503, view), newCountingDNSD(t, 200, view)}
	w, err := NewViewWatcher(ViewWatcherOptions{URLs: []string{d[0].srv.URL, d[1].srv.URL}, Group: "www.example.org"})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name   string
		codes  [2]int32
		wantN  [2]int64 // requests so far
		wantOK bool
	}{
		{"the first fails, the second answers", [2]int32{503, 200}, [2]int64{1, 1}, true},
		{"the one that answered is asked first", [2]int32{200, 200}, [2]int64{1, 2}, true},
		{"it fails: back to the first", [2]int32{200, 503}, [2]int64{2, 3}, true},
		{"both fail: the old view stays", [2]int32{503, 503}, [2]int64{3, 4}, false},
	}
	for _, st := range steps {
		d[0].code.Store(st.codes[0])
		d[1].code.Store(st.codes[1])
		err := w.Refresh(context.Background())
		if (err == nil) != st.wantOK {
			t.Errorf("%s: Refresh: %v", st.name, err)
		}
		if n := [2]int64{d[0].n.Load(), d[1].n.Load()}; n != st.wantN {
			t.Errorf("%s: requests %v, want %v", st.name, n, st.wantN)
		}
		if w.Snapshot() == nil {
			t.Errorf("%s: no view", st.name)
		}
	}
	if n := testutil.ToFloat64(w.refreshes.WithLabelValues("1", viewHTTPError)); n != 2 {
		t.Errorf("view_refreshes_total{dnsd=1,result=http_error} = %g, want 2", n)
	}
}
