package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/transmirror/transmirror/probe/probetest"
)

// TestReloadUnderLoad reloads dnsd with SIGHUP while clients query it: every
// query is answered, new data appears, and a broken config is refused while
// the old data keeps answering.
func TestReloadUnderLoad(t *testing.T) {
	d, dir := startE2EDNSD(t)
	zonePath := filepath.Join(dir, "example.test.zone")
	orig, err := os.ReadFile(zonePath)
	if err != nil {
		t.Fatal(err)
	}

	// Load: 4 clients, UDP and TCP, until told to stop (bounded by a deadline).
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var sent, failed atomic.Int64
	var firstErr atomic.Pointer[string]
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &dns.Client{Net: []string{"udp", "tcp"}[i%2], Timeout: 2 * time.Second}
			m := new(dns.Msg).SetQuestion("mail.example.test.", dns.TypeA)
			for ctx.Err() == nil {
				r, _, err := c.Exchange(m, d.Addr)
				sent.Add(1)
				if err == nil && (r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1) {
					err = fmt.Errorf("rcode %s, %d answers", dns.RcodeToString[r.Rcode], len(r.Answer))
				}
				if err != nil {
					failed.Add(1)
					msg := err.Error()
					firstErr.CompareAndSwap(nil, &msg)
				}
			}
		}()
	}

	for i := 1; i <= 5; i++ {
		serial := 2026113001 + i
		zone := strings.Replace(string(orig), "2026113001", fmt.Sprint(serial), 1) +
			fmt.Sprintf("new%d IN A 127.0.5.%d\n", i, i)
		writeFile(t, dir, "example.test.zone.tmp", zone)
		if err := os.Rename(filepath.Join(dir, "example.test.zone.tmp"), zonePath); err != nil {
			t.Fatal(err)
		}
		d.Signal(syscall.SIGHUP)
		name := fmt.Sprintf("new%d.example.test", i)
		probetest.Until(t, 10*time.Second, func() string {
			r := d.Dig(t, name, "A")
			if r.Status != "NOERROR" || len(r.Answer) != 1 {
				return fmt.Sprintf("%s not served after reload %d: %s", name, i, r.Status)
			}
			return ""
		})
	}

	// A broken zone (no SOA) is refused; the old data keeps answering.
	broken := strings.Replace(string(orig), "IN SOA", "IN TXT \"no soa\" ;", 1)
	writeFile(t, dir, "example.test.zone", broken)
	resp, err := http.Post("http://"+d.Admin+"/-/reload", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "example.test.zone") {
		t.Errorf("POST /-/reload with a broken zone: %d %s; want 400 naming the zone file", resp.StatusCode, body)
	}
	d.Signal(syscall.SIGHUP)
	probetest.Until(t, 10*time.Second, func() string {
		if !strings.Contains(d.Logs(), "reload failed") {
			return "no 'reload failed' log line after SIGHUP with a broken zone"
		}
		return ""
	})
	if r := d.Dig(t, "new5.example.test", "A"); r.Status != "NOERROR" || len(r.Answer) != 1 {
		t.Errorf("after a refused reload the old data must keep answering:\n%s", r.Raw)
	}
	if r := d.Dig(t, "+short", "example.test", "SOA"); !strings.Contains(r.Raw, "2026113006") {
		t.Errorf("serial after refused reload: %q, want 2026113006", r.Raw)
	}
	if m := scrape(t, d.Admin); !strings.Contains(m, "transmirror_dnsd_config_last_reload_successful 0") {
		t.Errorf("metrics do not show the failed reload")
	}

	cancel()
	wg.Wait()
	t.Logf("queries during reloads: %d sent, %d failed", sent.Load(), failed.Load())
	if sent.Load() < 100 {
		t.Errorf("only %d queries sent during the reloads", sent.Load())
	}
	if failed.Load() > 0 {
		t.Errorf("%d of %d queries failed during reloads; first: %s", failed.Load(), sent.Load(), *firstErr.Load())
	}
}
