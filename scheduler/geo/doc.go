// Package geo tells where a DNS client is.
//
// A [Locator] answers from, in this order, a static networks table (longest
// prefix wins), a GeoIP2 or GeoLite2 City or Country database (an .mmdb
// file), and a default location. [ClientPrefix], [ECSOptOut], [TrustedECS]
// and [ReplyScope] apply EDNS Client Subnet (RFC 7871): which prefix to
// locate, and which SCOPE PREFIX-LENGTH to put in the reply.
//
// The usual flow for one query:
//
//	p := geo.ClientPrefix(src, ecs, hasECS) // never longer than /24 or /56
//	res := loc.Locate(p)
//	if hasECS {
//		scope := geo.ReplyScope(ecs, res)
//		// echo FAMILY, SOURCE PREFIX-LENGTH and ADDRESS, set SCOPE to scope
//	}
//
// [FromConfig] is the one builder of both daemons: it turns the geo block
// of a config file (zones/yamlconf.Geo, the same in dnsd's and the
// mirror's) into a Locator, reading the database and refusing one that is
// corrupt with an error that names the file.
//
// [WriteMMDB] and [ReadRows] build small test databases from a CSV table;
// cmd/mkmmdb is the command line for them.
//
// # Test fixture
//
// testdata/regions.csv is made into testdata/regions.mmdb (database type
// GeoIP2-City) by `go generate ./scheduler/geo`, which runs cmd/mkmmdb; a
// test checks that the committed .mmdb is exactly what the generator makes
// from the .csv (`go test ./scheduler/geo -run TestFixture -update`
// rewrites it too). The demo and the end-to-end tests use it:
//
//	network               country  continent  lat     lon      place
//	198.51.100.0/25       DE       EU         50.11     8.68   Frankfurt
//	203.0.113.0/25        US       NA         40.71   -74.01   New York
//	192.0.2.0/25          SG       AS          1.35   103.82   Singapore
//	2001:db8:1::/48       DE       EU         50.11     8.68   Frankfurt
//	2001:db8:1:ff00::/56  GB       EU         51.51    -0.13   London
//	2001:db8:2::/48       US       NA         40.71   -74.01   New York
//	2001:db8:3::/48       SG       AS          1.35   103.82   Singapore
//	2001:db8:4::/48       JP       AS         (none)           country only
//
// The IPv4 regions are /25s, but [ClientPrefix] truncates every client to
// /24 and [Locator.Locate] looks up the first address of the prefix it is
// given, so through ClientPrefix every client of 198.51.100.0/24 (ECS or
// source address) is in Frankfurt, every one of 203.0.113.0/24 in New York
// and every one of 192.0.2.0/24 in Singapore, each with scope 24. Only a raw
// /32 in an upper half (say Locate(198.51.100.200/32)) finds nothing and
// gets the default. Anything else, e.g. 100.64.0.0/10 or 2001:db8:99::/48,
// is unknown to the fixture.
package geo

//go:generate go run ../../cmd/mkmmdb -in testdata/regions.csv -out testdata/regions.mmdb
