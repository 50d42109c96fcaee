package e2e

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// RRL settings of the flood test: a bucket allows rrlRate responses a
// second and saves up rrlRate × rrlWindow.
const (
	rrlRate   = 100
	rrlWindow = 1 // seconds
	rrlFlood  = 10000
)

// TestRRLFlood: the real dnsd with response rate limiting on, flooded with
// 10,000 UDP queries within a second from one loopback address, sends at
// most rate × elapsed + burst full answers, and every other reply it
// sends is a slip with TC set and no records; a client on another /24
// querying at the same time gets every answer, and so does dig over TCP
// from the flooded address.
func TestRRLFlood(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join("testdata", "example.test.zone"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "example.test.zone", string(data))
	cfg := writeFile(t, dir, "dnsd.yaml", `
listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
server:
  rrl: {enabled: true, rate: 100, window: 1s, slip: 2}
zones:
  - origin: example.test.
    file: example.test.zone
`)
	d := startDNSD(t, true, "-config", cfg)
	dst, err := net.ResolveUDPAddr("udp", d.Addr)
	if err != nil {
		t.Fatal(err)
	}

	flooder, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer flooder.Close()
	q := new(dns.Msg)
	q.SetQuestion("mail.example.test.", dns.TypeA)
	wire, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}

	// Read the flood's replies until 2 s after the last query went out.
	var full, slips, other int
	var lastReply time.Time
	var readWG sync.WaitGroup
	var sendEnd time.Time
	sent := make(chan struct{})
	readWG.Go(func() {
		buf := make([]byte, 4096)
		for {
			select {
			case <-sent:
				if err := flooder.SetReadDeadline(sendEnd.Add(2 * time.Second)); err != nil {
					return
				}
			default:
				_ = flooder.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			}
			n, _, err := flooder.ReadFromUDP(buf)
			if err != nil {
				select {
				case <-sent:
					if time.Now().After(sendEnd.Add(2 * time.Second)) {
						return
					}
				default:
				}
				continue
			}
			lastReply = time.Now()
			m := new(dns.Msg)
			switch {
			case m.Unpack(buf[:n]) != nil:
				other++
			case m.Truncated && len(m.Answer) == 0 && len(m.Ns) == 0:
				slips++
			case !m.Truncated && len(m.Answer) > 0:
				full++
			default:
				other++
			}
		}
	})

	// Meanwhile a client on another /24 asks once every 20 ms, as a stub
	// resolver does: a query lost on the way (the flood fills the
	// socket's buffer, and the kernel drops what does not fit) is sent
	// once more after its timeout. RRL never drops the bystander's
	// queries, so a reply that is a slip or empty, or a second loss, is a
	// failure.
	var bystander struct {
		asked, answered, resent int
		failures                []string
	}
	var tcpFailures []string
	var sideWG sync.WaitGroup
	stopSide := make(chan struct{})
	sideWG.Go(func() {
		c := &dns.Client{Net: "udp", Timeout: 2 * time.Second,
			Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.IPv4(127, 0, 1, 1)}}}
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSide:
				return
			case <-tick.C:
			}
			m := new(dns.Msg)
			m.SetQuestion("mail.example.test.", dns.TypeA)
			bystander.asked++
			r, _, err := c.Exchange(m, d.Addr)
			if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
				bystander.resent++
				r, _, err = c.Exchange(m, d.Addr)
			}
			if err != nil || r.Truncated || len(r.Answer) == 0 {
				bystander.failures = append(bystander.failures, describe(r, err))
				continue
			}
			bystander.answered++
		}
	})

	// The flood: 10,000 queries in batches of 100 every 10 ms.
	start := time.Now()
	var sendErr error
	floodDone := make(chan struct{})
	go func() {
		defer close(floodDone)
		for i := 0; i < rrlFlood; i += 100 {
			for range 100 {
				if _, err := flooder.WriteToUDP(wire, dst); err != nil {
					sendErr = err
					return
				}
			}
			if next := start.Add(time.Duration(i/100+1) * 10 * time.Millisecond); time.Until(next) > 0 {
				time.Sleep(time.Until(next)) // pacing the sender, not waiting for a result
			}
		}
	}()
	// dig over TCP from the flooded address: TCP is never limited.
	for range 5 {
		if r := d.Dig(t, "+tcp", "-b", "127.0.0.1", "mail.example.test.", "A"); r.Status != "NOERROR" || len(r.Answer) == 0 {
			tcpFailures = append(tcpFailures, r.Raw)
		}
	}
	<-floodDone
	if sendErr != nil {
		t.Fatal(sendErr)
	}
	sendEnd = time.Now()
	close(sent)
	readWG.Wait()
	close(stopSide)
	sideWG.Wait()
	elapsed := sendEnd.Sub(start)

	// The server refills the bucket while it works through the flood, up
	// to the last reply it sent.
	limit := int(rrlRate*lastReply.Sub(start).Seconds()) + rrlRate*rrlWindow + 1
	t.Logf("flood of %d in %v: %d full answers (limit %d), %d slips, %d other; bystander %d/%d answered (%d sent again after a loss)",
		rrlFlood, elapsed.Round(time.Millisecond), full, limit, slips, other, bystander.answered, bystander.asked, bystander.resent)
	if full > limit {
		t.Errorf("%d full answers to the flooding address in %v, want at most rate × time + burst = %d", full, lastReply.Sub(start), limit)
	}
	if full < rrlRate*rrlWindow/2 {
		t.Errorf("only %d full answers: the burst of %d should have gone out", full, rrlRate*rrlWindow)
	}
	if slips == 0 || other != 0 {
		t.Errorf("%d slips and %d other replies: want slips with TC and no records, nothing else", slips, other)
	}
	if len(bystander.failures) > 0 || bystander.answered == 0 {
		t.Errorf("the client on 127.0.1.0/24 got %d of %d answers; failures: %v", bystander.answered, bystander.asked, bystander.failures)
	}
	if len(tcpFailures) > 0 {
		t.Errorf("dig +tcp during the flood: %v", tcpFailures)
	}

	text := scrape(t, d.Admin)
	dropped := metricSum(text, "transmirror_dnsd_rrl_responses_total", `action="dropped"`)
	slipped := metricSum(text, "transmirror_dnsd_rrl_responses_total", `action="slipped"`)
	if slipped < float64(slips) || dropped == 0 {
		t.Errorf("metrics: %v dropped, %v slipped; the client saw %d slips", dropped, slipped, slips)
	}
	if !strings.Contains(text, `transmirror_dnsd_rrl_responses_total{action="dropped",kind="answer"}`) {
		t.Error("no rrl_responses_total for answers in /metrics")
	}
}

func describe(r *dns.Msg, err error) string {
	if err != nil {
		return err.Error()
	}
	return dns.RcodeToString[r.Rcode] + map[bool]string{true: " TC", false: ""}[r.Truncated]
}
