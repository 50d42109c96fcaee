//go:build unix

package frontend

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"os"
	"slices"
	"syscall"
	"testing"
)

// socketPair returns the two ends of a connected Unix stream socket pair,
// closed when the test ends.
func socketPair(t testing.TB) (a, b *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	ends := make([]*net.UnixConn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f) // dups the descriptor
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		ends[i] = c.(*net.UnixConn)
		t.Cleanup(func() { ends[i].Close() })
	}
	return ends[0], ends[1]
}

// openFDs counts the process's open descriptors, -1 where that is not
// known.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// handoffRecord is one record of a back end's reports.
type handoffRecord struct {
	kind byte
	key  string
	size int64
}

// FuzzReadReport reads a back end's reports of the requests it serves on
// a handed-off connection, as the front end does, from any bytes: it ends
// at the first error, every record it returns is within its bounds, and
// the records written again by the back end's writer (handoffReports, over
// a real Unix socket) read back the same. The seed corpus is in
// testdata/fuzz/FuzzReadReport.
func FuzzReadReport(f *testing.F) {
	f.Add([]byte("b\x06/a.bine\xe8\x07"))
	f.Add([]byte("b\x06/a.bine\xe8\x07b\x0b/b.bin?x=1e\x00"))
	f.Add([]byte("e\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01")) // a uvarint overflowing 64 bits
	f.Add([]byte("e\xff\xff\xff\xff\xff\xff\xff\xff\x7f"))     // a size beyond 1<<62
	f.Add([]byte("b\x81\x80\x01/"))                            // a key longer than maxReportKey
	f.Add([]byte("x\x00"))                                     // an unknown record
	f.Add([]byte("b\x0a/short"))                               // a key cut short
	f.Add([]byte("e\x80\x00"))                                 // a size written in two bytes
	f.Fuzz(func(t *testing.T, data []byte) {
		w, r := socketPair(t) // per input: no input sees another's bytes
		rep := &handoffReports{uc: w}
		in := bufio.NewReader(bytes.NewReader(data))
		var recs []handoffRecord
		for {
			kind, key, size, err := readReport(in)
			if err != nil {
				break
			}
			switch {
			case kind != reportBegin && kind != reportEnd:
				t.Fatalf("record %q", kind)
			case len(key) > maxReportKey || size < 0 || size > 1<<62:
				t.Fatalf("record %q: key of %d bytes, size %d", kind, len(key), size)
			case kind == reportBegin && size != 0, kind == reportEnd && key != "":
				t.Fatalf("record %q with key %q and size %d", kind, key, size)
			}
			recs = append(recs, handoffRecord{kind, key, size})
		}
		// The front end reads while the back end writes, as in a
		// handoff: a socket's buffer is counted in its writes, not its
		// bytes, and holds only a few hundred small records.
		type readBack struct {
			recs []handoffRecord
			err  error
		}
		done := make(chan readBack, 1)
		go func() {
			br := bufio.NewReader(r)
			var got readBack
			for range recs {
				kind, key, size, err := readReport(br)
				if err != nil {
					got.err = err
					break
				}
				got.recs = append(got.recs, handoffRecord{kind, key, size})
			}
			done <- got
		}()
		for _, rec := range recs {
			rep.send(rec.kind, rec.key, rec.size)
		}
		if rep.broken {
			t.Fatal("the reports' socket broke")
		}
		got := <-done
		for i, want := range recs {
			if i >= len(got.recs) {
				t.Fatalf("record %d of %d written again: %v", i, len(recs), got.err)
			}
			if got.recs[i] != want {
				t.Fatalf("record %d written again reads %+v, want %+v", i, got.recs[i], want)
			}
		}
	})
}

// FuzzRecvConn sends the back end a handoff message, any bytes with a
// choice of descriptors attached (mode: 0 none, 1 a TCP connection, 2 a
// UDP socket, 3 a pipe, 4 two TCP connections), and checks recvConn. It
// takes a connection exactly when the message is one TCP connection and
// a 4-byte length of at most maxHandoffPrefix followed by at least that
// many bytes; the connection is the one sent, and reads those bytes
// first. Whatever happens, no descriptor is left open. The seed corpus is
// in testdata/fuzz/FuzzRecvConn.
func FuzzRecvConn(f *testing.F) {
	msg := func(prefix string) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(prefix))), prefix...)
	}
	head := "GET /a.bin HTTP/1.1\r\nHost: mirror.example.org\r\nUser-Agent: curl/8.5.0\r\n\r\n"
	f.Add(uint8(1), msg(head))
	f.Add(uint8(1), msg(head+"GET /b.bin HTTP/1.1\r\nHost: mirror.example.org\r\n\r\n"))
	f.Add(uint8(1), msg(""))
	f.Add(uint8(1), msg(head)[:20])                  // cut short
	f.Add(uint8(1), []byte{0, 0})                    // no length
	f.Add(uint8(1), []byte{0, 0x10, 0, 1, 'G', 'E'}) // longer than maxHandoffPrefix
	f.Add(uint8(1), append(msg("GET"), "trailing"...))
	f.Add(uint8(0), msg(head))
	f.Add(uint8(2), msg(head))
	f.Add(uint8(3), msg(head))
	f.Add(uint8(4), msg(head))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		f.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		f.Fatal(err)
	}
	defer server.Close()
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	defer udp.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		f.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	fdOf := func(c syscall.Conn) int {
		rc, err := c.SyscallConn()
		if err != nil {
			f.Fatal(err)
		}
		fd := -1
		if err := rc.Control(func(u uintptr) { fd = int(u) }); err != nil {
			f.Fatal(err)
		}
		return fd
	}
	tcpFD, udpFD, pipeFD := fdOf(client.(*net.TCPConn)), fdOf(udp.(*net.UDPConn)), int(pr.Fd())

	f.Fuzz(func(t *testing.T, mode uint8, data []byte) {
		if len(data) > 128<<10 {
			return
		}
		var rights []int
		switch mode % 5 {
		case 1:
			rights = []int{tcpFD}
		case 2:
			rights = []int{udpFD}
		case 3:
			rights = []int{pipeFD}
		case 4:
			rights = []int{tcpFD, tcpFD}
		}
		before := openFDs()
		w, r := socketPair(t)
		sent := make(chan error, 1)
		go func() {
			var oob []byte
			if rights != nil {
				oob = syscall.UnixRights(rights...)
			}
			n, _, err := w.WriteMsgUnix(data, oob, nil)
			if err == nil && n < len(data) {
				_, err = w.Write(data[n:])
			}
			// The receiver reads to the end and never waits.
			if cerr := w.CloseWrite(); err == nil {
				err = cerr
			}
			sent <- err
		}()
		conn, err := recvConn(r)
		if serr := <-sent; serr != nil && len(data) > 0 {
			t.Fatalf("send: %v", serr)
		}
		var size int
		if len(data) >= 4 {
			size = int(binary.BigEndian.Uint32(data))
		}
		want := mode%5 == 1 && len(data) >= 4 && size <= maxHandoffPrefix && len(data) >= 4+size
		switch {
		case want && err != nil:
			t.Fatalf("recvConn refused a good message (mode %d, %d bytes): %v", mode%5, len(data), err)
		case !want && err == nil:
			conn.Close()
			t.Fatalf("recvConn took a bad message (mode %d, %d bytes)", mode%5, len(data))
		case want:
			if got, want := conn.LocalAddr().String(), client.LocalAddr().String(); got != want {
				t.Errorf("the connection received is %s, want %s", got, want)
			}
			got := make([]byte, size)
			if _, err := io.ReadFull(conn, got); err != nil || !slices.Equal(got, data[4:4+size]) {
				t.Errorf("the connection reads %q (%v), want its prefix %q", got, err, data[4:4+size])
			}
			conn.Close()
		}
		w.Close()
		r.Close()
		if after := openFDs(); after != before {
			t.Fatalf("%d descriptors open before, %d after", before, after)
		}
	})
}
