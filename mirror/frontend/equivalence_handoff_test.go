//go:build unix

package frontend

import (
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/transmirror/transmirror/mirror/webtest"
	"github.com/transmirror/transmirror/scheduler/sim/sitesim"
)

// serveHandoffs serves h on the handoff socket path, reporting each
// request to the front end (ReportHandoffs), until the test ends.
func serveHandoffs(t *testing.T, path string, h http.Handler) {
	t.Helper()
	hl, err := ListenHandoff(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: ReportHandoffs(h), ConnContext: HandoffConnContext, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(hl) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve %s: %v", path, err)
		}
	})
}

// TestSimulatorPicksAsHandoff: in handoff mode, with four back-end
// processes (in-process here) on Unix sockets that report their requests'
// ends. The client opens a connection per request: a kept-alive one stays
// with the back end it was handed to, and the front end would not pick
// the next request's back end at all.
func TestSimulatorPicksAsHandoff(t *testing.T) {
	s := newEquivSeq()
	dir := shortTempDir(t)
	var bs []Backend
	for i := range 4 {
		name := fmt.Sprintf("b%d", i+1)
		sock := filepath.Join(dir, name+".sock")
		serveHandoffs(t, sock, s.handler(name))
		bs = append(bs, Backend{Name: name, URL: webtest.Serve(t, s.handler(name)), HandoffSocket: sock, Memory: equivMemory})
	}
	for _, p := range equivPolicies() {
		t.Run(p.Name, func(t *testing.T) {
			clock := &equivClock{}
			base, h, reg := startSiteWith(t, Config{Mode: ModeHandoff, Policy: p, Health: quietHealth},
				Options{Rand: sitesim.PolicyRand(equivSeed), Now: clock.now}, slices.Clone(bs)...)
			client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
			compare(t, live{base: base, h: h, clock: clock, client: client}, sitesim.ModeHandoff, p, s)
			ok := webtest.SampleSum(t, reg, "transmirror_mirror_handoffs_total", map[string]string{"result": handoffOK})
			if want := float64(len(s.reqs)); ok != want {
				t.Errorf("handoffs_total{ok} %g, want %g: every request handed off", ok, want)
			}
		})
	}
}
