// Package dnsd is transmirror's authoritative DNS server: a protocol edge
// built on miekg/dns (UDP and TCP on sockets the caller opened) in front of
// a CoreDNS-shaped handler chain that answers from zones and mirror groups.
//
// The edge applies protocol hygiene once for every reply: FORMERR, NOTIMP,
// REFUSED, BADVERS and TSIG errors with clean header flags, EDNS (OPT echo,
// cookies, NSID, client subnet), truncation to the client's buffer with TC,
// AA/RA/RD and 0x20 question echo, and recover() → SERVFAIL. Handlers only
// build answers.
//
// Common UDP queries take a fast path (fast.go) that answers from the
// packet's bytes and is proven byte for byte against the slow path (the
// edge and the chain) by a differential test and fuzz target. Both paths
// take the rules they share, what a query's EDNS options mean and how a
// group's addresses become the reply, from one place (ednsrules.go); each
// keeps only its own reading and writing of the wire.
//
// Configuration arrives as an immutable *zones.Set through Server.Prepare
// (or Load), which builds the handler chain once; its commit swaps it in
// atomically; queries never rebuild anything. Group names are answered by
// a GroupAnswerer that the caller plugs in.
//
// The rest of the global level lives beside it, one job a package:
// dnsd/dispatch answers groups (locate, policy, TTL, ECS scope);
// dnsd/members is the member registry (config plus run-time members,
// drains, the state file) with prepare → persist → commit; dnsd/admin is
// the admin HTTP server, the dashboard and the event log. cmd/dnsd wires
// them together.
//
// Choices where the RFCs leave room:
//   - Messages that miekg/dns cannot unpack are dropped without a reply
//     (any reply could be used for amplification); messages that unpack but
//     break the rules (QDCOUNT≠1, two OPT records, misplaced OPT or TSIG,
//     bad cookie length, QTYPE OPT/TSIG) get FORMERR.
//   - AXFR over UDP is REFUSED (RFC 5936 §4.2 defines AXFR over TCP only).
//     IXFR over TCP gets a full AXFR-style answer (RFC 1995 §4); IXFR over
//     UDP gets the SOA alone, which tells the client to retry over TCP.
//     Both need the client address in the zone's allow_transfer; a TSIG
//     signature is verified but does not replace the address check. A
//     transfer query for a name that is not a zone apex is REFUSED.
//   - ANY over UDP is answered with one RRset, the one with the lowest type
//     code (RFC 8482 §4.1); over TCP with every RRset of the name.
//   - Classes other than IN and CH are REFUSED; CH answers only TXT (and
//     ANY) for id.server, hostname.bind, version.bind and version.server.
//   - Replies to a query with an EDNS Client Subnet option echo it with
//     scope 0, or, for group answers, with the scope the GroupAnswerer
//     returned (no option when it returned -1).
//   - Server cookies (RFC 7873) are 8 bytes of HMAC-SHA256 over the client
//     cookie and address under a per-Server random secret; an incoming
//     server cookie is not required or checked.
//   - TSIG keys are looked up in the current snapshot on every message
//     (a TsigProvider, not dns.Server.TsigSecret), so reloads change them
//     without restarting listeners. TSIG error replies are unsigned
//     (RFC 8945 §5.3.2), BADTIME included.
package dnsd
