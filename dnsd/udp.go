package dnsd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

const (
	// udpBatch is how many datagrams one system call reads or writes.
	udpBatch = 32
	// udpReadSize is the largest query read; a longer one is dropped.
	// Replies are at most max_udp_size (≤ 4096) too.
	udpReadSize = 4096
	// maxReadErrors consecutive read errors stop a socket's loop.
	maxReadErrors = 100
)

// ServeUDP serves DNS over UDP on pc, which it closes on return. It blocks
// until ctx is done, then stops reading, finishes the queries it has read
// and returns nil. A *net.UDPConn is served by one loop that reads and
// writes batches of datagrams (recvmmsg and sendmmsg) and answers them in
// line, without a goroutine per query: give it one socket per core
// (SO_REUSEPORT) to use every core.
func (s *Server) ServeUDP(ctx context.Context, pc net.PacketConn) error {
	defer pc.Close()
	stop := context.AfterFunc(ctx, func() { _ = pc.Close() })
	defer stop()
	hctx := context.WithoutCancel(ctx) // queries read finish during shutdown
	var err error
	if c, ok := pc.(*net.UDPConn); ok {
		err = s.serveBatches(hctx, c)
	} else {
		err = s.servePackets(hctx, pc)
	}
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("dnsd: serve udp: %w", err)
}

// servePacket answers one UDP query pkt from remote and returns the reply
// (in out's room when it fits), or nil for none: the fast path when it can,
// else the slow path. addrs is the caller's room for group answers.
func (s *Server) servePacket(ctx context.Context, pkt []byte, local, remote net.Addr, addrs *[]netip.Addr, out []byte) []byte {
	var dec groupDecision
	if snap := s.snap.Load(); snap != nil && snap.fast != nil {
		start := time.Now()
		if b, ok := s.tryFast(ctx, snap, pkt, remote, addrs, out, &dec); ok {
			s.m.udpDuration.Observe(time.Since(start).Seconds())
			return b
		}
	}
	return s.serveSlow(ctx, pkt, local, remote, out, dec)
}

// serveSlow is the slow path for one UDP query: miekg/dns unpacks it and
// ServeMsg answers it. It drops, and counts, what can not be unpacked
// (miekg's own server would answer those with FORMERR echoing the
// request's flags); responses are ignored. dec is the group answer the
// fast path got for pkt, if any (a zero name: none).
func (s *Server) serveSlow(ctx context.Context, pkt []byte, local, remote net.Addr, out []byte, dec groupDecision) []byte {
	if len(pkt) < headerSize {
		s.m.dropped.Inc()
		return nil
	}
	if pkt[2]&0x80 != 0 {
		return nil // a response
	}
	r := new(dns.Msg)
	if err := r.Unpack(pkt); err != nil {
		s.m.dropped.Inc()
		return nil
	}
	w := &udpWriter{local: local, remote: remote, room: out[:0], tsig: tsigProvider{s: s}}
	if t := r.IsTsig(); t != nil {
		// miekg's verification rewrites the ID and ARCOUNT of the bytes it
		// is given: give it a copy.
		w.tsigStatus = dns.TsigVerifyWithProvider(slices.Clone(pkt), w.tsig, "", false)
		w.tsigMAC = t.MAC
	}
	var decided *groupDecision
	if dec.name != "" {
		decided = &dec
	}
	s.serveMsg(ctx, w, r, "udp", decided)
	return w.reply
}

// udpWriter is the slow path's dns.ResponseWriter: it packs the one reply
// (signing it when it carries a TSIG record, as miekg's server does) into
// the caller's room.
type udpWriter struct {
	local, remote net.Addr
	room          []byte
	reply         []byte
	tsig          dns.TsigProvider
	tsigStatus    error
	tsigMAC       string
}

var _ dns.ResponseWriter = (*udpWriter)(nil)

var errSecondReply = errors.New("dnsd: a second reply to one UDP query")

func (w *udpWriter) LocalAddr() net.Addr  { return w.local }
func (w *udpWriter) RemoteAddr() net.Addr { return w.remote }
func (w *udpWriter) Network() string      { return "udp" }
func (w *udpWriter) TsigStatus() error    { return w.tsigStatus }
func (w *udpWriter) TsigTimersOnly(bool)  {}
func (w *udpWriter) Hijack()              {}
func (w *udpWriter) Close() error         { return nil }

func (w *udpWriter) WriteMsg(m *dns.Msg) error {
	if w.reply != nil {
		return errSecondReply
	}
	if t := m.IsTsig(); t != nil && w.tsig != nil {
		b, _, err := dns.TsigGenerateWithProvider(m, w.tsig, w.tsigMAC, false)
		if err != nil {
			return err
		}
		w.reply = b
		return nil
	}
	b, err := m.PackBuffer(w.room[:cap(w.room)])
	if err != nil {
		return err
	}
	w.reply = b
	return nil
}

func (w *udpWriter) Write(b []byte) (int, error) {
	if w.reply != nil {
		return 0, errSecondReply
	}
	w.reply = append(w.room[:0], b...)
	return len(b), nil
}

// batchConn is the batch I/O of golang.org/x/net's ipv4 and ipv6
// PacketConn (one Message type for both).
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

// udpSlot is the room of one datagram of a batch.
type udpSlot struct {
	in, oob, out []byte
	wb           [][]byte // Buffers of the reply's Message
}

// serveBatches reads batches of queries on c, answers them in line and
// writes the replies in batches. On a socket bound to a wildcard address
// the replies go out from the address each query was sent to.
func (s *Server) serveBatches(ctx context.Context, c *net.UDPConn) error {
	la, _ := c.LocalAddr().(*net.UDPAddr)
	if la == nil {
		return errors.New("socket has no local address")
	}
	v4 := la.IP.To4() != nil
	wildcard := la.IP.IsUnspecified()
	bc, err := newBatchConn(c, v4, wildcard)
	if err != nil {
		return fmt.Errorf("destination addresses on %s: %w", la, err)
	}
	rms := make([]ipv4.Message, udpBatch)
	slots := make([]udpSlot, udpBatch)
	for i := range slots {
		slots[i] = udpSlot{in: make([]byte, udpReadSize), out: make([]byte, 0, udpReadSize), wb: make([][]byte, 1)}
		rms[i].Buffers = [][]byte{slots[i].in}
		if wildcard {
			slots[i].oob = make([]byte, 128)
			rms[i].OOB = slots[i].oob
		}
	}
	b := &udpBatcher{s: s, c: c, la: la, v4: v4, wildcard: wildcard, wms: make([]ipv4.Message, 0, udpBatch)}
	for errs := 0; ; {
		n, err := bc.ReadBatch(rms, 0)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			if errs++; errs >= maxReadErrors {
				return err
			}
			s.log.Warn("dnsd: udp read", "addr", la.String(), "err", err)
			continue
		}
		errs = 0
		b.answer(ctx, rms[:n], slots[:n])
		b.write(bc)
	}
}

// newBatchConn returns the batch I/O of c, which reports each query's
// destination address when c is bound to a wildcard address.
func newBatchConn(c *net.UDPConn, v4, wildcard bool) (batchConn, error) {
	if v4 {
		p := ipv4.NewPacketConn(c)
		if wildcard {
			if err := p.SetControlMessage(ipv4.FlagDst, true); err != nil {
				return nil, err
			}
		}
		return p, nil
	}
	p := ipv6.NewPacketConn(c)
	if wildcard {
		if err := p.SetControlMessage(ipv6.FlagDst, true); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// udpBatcher answers the queries of one socket's batches and keeps the
// replies to write.
type udpBatcher struct {
	s            *Server
	c            *net.UDPConn
	la           *net.UDPAddr
	v4, wildcard bool
	addrs        []netip.Addr   // room for group answers
	wms          []ipv4.Message // the batch's replies
}

// answer answers the queries read into rms and slots, keeping the
// replies for write.
func (b *udpBatcher) answer(ctx context.Context, rms []ipv4.Message, slots []udpSlot) {
	b.wms = b.wms[:0]
	for i := range rms {
		m, sl := &rms[i], &slots[i]
		ra, ok := m.Addr.(*net.UDPAddr)
		if !ok || m.Flags&syscall.MSG_TRUNC != 0 {
			b.s.m.dropped.Inc()
			continue
		}
		out := b.s.servePacket(ctx, sl.in[:m.N], b.la, ra, &b.addrs, sl.out[:0])
		if out == nil {
			continue
		}
		var oob []byte
		if b.wildcard {
			oob = replyOOB(b.v4, m.OOB[:m.NN])
		}
		if !b.v4 && ra.IP.To4() != nil {
			// x/net would address an IPv4-mapped client as AF_INET on
			// this AF_INET6 socket; the net package maps it.
			if _, _, err := b.c.WriteMsgUDP(out, oob, ra); err != nil {
				b.s.log.Debug("dnsd: udp write", "to", ra.String(), "err", err)
			}
			continue
		}
		sl.wb[0] = out
		b.wms = append(b.wms, ipv4.Message{Buffers: sl.wb, OOB: oob, Addr: ra})
	}
}

// write writes the replies answer kept, skipping any that fails.
func (b *udpBatcher) write(bc batchConn) {
	for wms := b.wms; len(wms) > 0; {
		k, err := bc.WriteBatch(wms, 0)
		if err != nil {
			b.s.log.Debug("dnsd: udp write", "to", wms[min(k, len(wms)-1)].Addr.String(), "err", err)
			k++ // skip the one that failed
		}
		wms = wms[min(k, len(wms)):]
	}
}

// replyOOB returns the control message that sends a reply from the
// destination address of the query whose control message is oob; nil when
// it has none.
func replyOOB(v4 bool, oob []byte) []byte {
	if v4 {
		var cm ipv4.ControlMessage
		if cm.Parse(oob) != nil || cm.Dst == nil {
			return nil
		}
		return (&ipv4.ControlMessage{Src: cm.Dst}).Marshal()
	}
	var cm ipv6.ControlMessage
	if cm.Parse(oob) != nil || cm.Dst == nil {
		return nil
	}
	if v4 := cm.Dst.To4(); v4 != nil {
		// An IPv4 client of a dual-stack socket: IP_PKTINFO (x/net's
		// ipv6 message leaves IPv4-mapped sources out).
		return (&ipv4.ControlMessage{Src: v4}).Marshal()
	}
	return (&ipv6.ControlMessage{Src: cm.Dst}).Marshal()
}

// servePackets serves a PacketConn that is not a *net.UDPConn, one
// datagram at a time.
func (s *Server) servePackets(ctx context.Context, pc net.PacketConn) error {
	buf, out := make([]byte, udpReadSize), make([]byte, 0, udpReadSize)
	var addrs []netip.Addr
	for errs := 0; ; {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			if errs++; errs >= maxReadErrors {
				return err
			}
			s.log.Warn("dnsd: udp read", "addr", pc.LocalAddr().String(), "err", err)
			continue
		}
		errs = 0
		if b := s.servePacket(ctx, buf[:n], pc.LocalAddr(), addr, &addrs, out[:0]); b != nil {
			if _, err := pc.WriteTo(b, addr); err != nil {
				s.log.Debug("dnsd: udp write", "to", addr.String(), "err", err)
			}
		}
	}
}
