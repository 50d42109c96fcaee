package main

import (
	"fmt"
	"io"
	"net"
	"strings"
)

// cmdPrefix starts every printed command line, so that a reader (or a
// test) can pick them out: everything after it is one sh command line.
const cmdPrefix = "  $ "

// digCommand is the dig that asks dnsd for the group from a client subnet.
func digCommand(subnet string) string {
	host, port, _ := net.SplitHostPort(dnsAddr)
	return fmt.Sprintf("dig @%s -p %s %s A +subnet=%s +short", host, port, groupName, subnet)
}

// curlCommand fetches path through the group name from the front end at ip.
func curlCommand(ip, path string) string {
	return fmt.Sprintf(`curl -s --resolve %s:%s:%s http://%s:%s%s -o /dev/null -w '%%{http_code} %%{size_download}\n'`,
		groupName, httpPort, ip, groupName, httpPort, path)
}

// curlHTTPSCommand fetches path over https through the group name from
// the front end at ip, trusting the demo's CA.
func curlHTTPSCommand(ip, path, ca string) string {
	return fmt.Sprintf(`curl -s --cacert %s --resolve %s:%s:%s https://%s:%s%s -o /dev/null -w '%%{http_code} %%{size_download}\n'`,
		shellQuote(ca), groupName, httpsPort, ip, groupName, httpsPort, path)
}

// loadCommand pushes the clients of subnet against the group.
func loadCommand(groupctl, subnet string) string {
	return fmt.Sprintf("%s load -dns %s -subnet %s -rate 100 -duration 30s -paths /pub/file-%%04d.bin -files %d http://%s:%s/",
		groupctl, dnsAddr, subnet, nFiles, groupName, httpPort)
}

// printBanner prints the running demo and the commands to try.
func (d *demo) printBanner(w io.Writer) {
	admin := "http://" + adminAddr
	gc := d.bins.shownGroupctl
	eu := d.sites[0]
	cmd := func(c string, comment ...string) {
		if len(comment) > 0 {
			c += "   # " + strings.Join(comment, " ")
		}
		fmt.Fprintln(w, cmdPrefix+c)
	}
	fmt.Fprintf(w, "\ntransmirror demo: the mirror group %s on this machine, loopback only\n\n", groupName)
	fmt.Fprintf(w, "  dnsd        DNS %s (UDP and TCP), admin %s, pid %d\n", d.dnsd.Addr("dns"), d.dnsd.Addr("admin"), d.dnsd.PID())
	for _, s := range d.sites {
		fe := d.frontends[s.Name]
		var bes []string
		for _, u := range d.backends[s.Name] {
			bes = append(bes, strings.TrimPrefix(u, "http://"))
		}
		fmt.Fprintf(w, "  %-5s %s    http://%s  https://%s  %s front end (lard) over %s, admin %s\n",
			s.Name, s.Region, fe.Addr("http"), net.JoinHostPort(s.IP, httpsPort), s.City, strings.Join(bes, " "), fe.Addr("admin"))
	}
	fmt.Fprintf(w, "  content     %d files under /pub/ (%s .. %s, 4 KiB to 1 MiB, %.1f MiB in all)\n",
		nFiles, strings.TrimPrefix(fileName(1), "/pub/"), strings.TrimPrefix(fileName(nFiles), "/pub/"), float64(d.content)/(1<<20))
	fmt.Fprintf(w, "  capacity    %d load units per site (load = 10 x (requests/s + run queue): about 50 requests/s)\n", capacity)

	fmt.Fprintf(w, "\nDashboard: %s/\n", admin)

	fmt.Fprintln(w, "\nEach region gets its own mirror (the EDNS Client Subnet says where the client is):")
	for _, s := range d.sites {
		cmd(digCommand(s.Subnet), fmt.Sprintf("%s (%s): %s %s", s.Region, s.City, s.IP, s.Name))
	}
	as := d.sites[len(d.sites)-1]
	cmd(digCommand(as.Subnet6), fmt.Sprintf("%s over IPv6: %s %s", as.Region, as.IP, as.Name))

	fmt.Fprintf(w, "\nFetch a file through the group name, from the mirror dig gave Europe (curl can not ask dnsd, so --resolve pins that answer):\n")
	cmd(curlCommand(eu.IP, fileName(1)), fmt.Sprintf("200 %d", fileSize(1)))
	fmt.Fprintf(w, "and over https (every front end has a certificate for %s from the demo's own CA):\n", groupName)
	cmd(curlHTTPSCommand(eu.IP, fileName(1), d.lay.CA), fmt.Sprintf("200 %d", fileSize(1)))

	fmt.Fprintln(w, "\nThe group as dnsd sees it (state, load, answer share of each member):")
	cmd(fmt.Sprintf("%s -server %s status %s", gc, admin, groupName))
	cmd(fmt.Sprintf("%s -server %s explain %s -client 127.0.0.1 -ecs %s", gc, admin, groupName, eu.Subnet))

	fmt.Fprintf(w, "\nPush twice %s's capacity at it from European clients for 30 s: it answers part of the\n", eu.Name)
	fmt.Fprintf(w, "requests with 302 to a sibling, and dnsd sends new European answers elsewhere (spill-over):\n")
	cmd(loadCommand(gc, eu.Subnet))
	fmt.Fprintln(w, "and while it runs, in another terminal:")
	cmd(digCommand(eu.Subnet), "EU under load: another site now")
	cmd(fmt.Sprintf("%s -server %s status %s", gc, admin, groupName))

	fmt.Fprintln(w, "\nTake a mirror out of the answers and put it back (signed with the group's secret):")
	cmd(fmt.Sprintf("%s -server %s -secret-file %s drain %s %s", gc, admin, shellQuote(d.lay.Secret), groupName, eu.Name))
	cmd(fmt.Sprintf("%s -server %s -secret-file %s undrain %s %s", gc, admin, shellQuote(d.lay.Secret), groupName, eu.Name))

	var pids []string
	for _, c := range d.allChildren() {
		pids = append(pids, fmt.Sprint(c.PID()))
	}
	fmt.Fprintf(w, "\ntemp dir: %s (configs in etc/, logs in logs/; removed on exit)\n", d.lay.Dir)
	fmt.Fprintf(w, "pids: %s\n", strings.Join(pids, " "))
	fmt.Fprintln(w, "Ctrl-C stops it.")
}
