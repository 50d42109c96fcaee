// Package content is a mirror's index of its document root: path → size
// and mtime of every regular file, kept current by rescans (and inotify
// where there is one), served incrementally to siblings and dnsd, and
// kept as a Replica from what a sibling serves.
//
// An Index is an immutable snapshot at a version. A Scanner makes the
// next version from a scan of the root when anything changed, with the
// Changes against the previous one, and keeps the last change sets so
// that Since answers "what changed since version V" without the whole
// index; a version it does not keep is answered with the full index.
// Rescans come on an interval, and early after inotify told of a change,
// never so often that scanning takes more than a tenth of the time. The
// Handler serves both on the admin API (KindHeader says which, ETag
// names the version), each body encoded once per version and gzipped
// once for a client that accepts gzip, each client rate limited.
//
// # What leaves the mirror
//
// Paths relative to the root and their size and mtime, never file
// contents. A path is clean, slash-separated, relative, valid UTF-8
// without NUL and at most MaxPathLen bytes, so it cannot name anything
// outside the root; a scan reads the tree through os.Root, takes a
// symbolic link only when it resolves to a regular file inside the root,
// never follows one to a directory, and skips names that are not such
// paths and files that are not regular.
//
// # Threat model of a sibling's index
//
// A sibling may be broken or hostile: a Replica and the decoders refuse,
// changing nothing, an input that is too big (Limits: files, bytes; a line
// is at most a path's escaped bytes), truncated, out of order, with a
// duplicate, a path with ".." or NUL, a change set that does not start at
// the copy's version, adds a path that the copy has or modifies or removes
// one that it has not. Every refusal of the decoder names the line:
//
//	content: line 12: path "a/../b": element ".."
//
// # Wire format
//
// Text, one record a line ending in "\n", streaming-decodable. The
// header line names the format (version 1), the kind, the versions and
// the number of records that follow; nothing may follow the last one:
//
//	transmirror-index 1 full VERSION COUNT
//	transmirror-index 1 changes FROM TO COUNT
//
// A full index's records are its files in strictly increasing byte order
// of their paths, each
//
//	SHARED SIZE MTIME SUFFIX
//
// where the path is the first SHARED bytes of the previous record's path
// followed by SUFFIX (front coding: a tree's sorted paths share long
// prefixes), SIZE is in bytes and MTIME is seconds since 1970 with a
// fraction ".NNNNNNNNN" when it is not whole. SUFFIX is never empty and
// writes '%', space and the ASCII control bytes as %XX (upper-case hex).
// A change set's records are in the same order, at most one per path,
// each an op and a record: "+ " (added) or "~ " (size or mtime changed)
// and SHARED SIZE MTIME SUFFIX, or "- SHARED SUFFIX" (removed).
//
//	transmirror-index 1 changes 41 42 3
//	+ 0 1024 1700000000 dists/stable/InRelease
//	~ 13 2048 1700000000.500000000 Release
//	- 0 pool/old.deb
//
// What a million files cost (scan time, memory, wire sizes) is measured
// by BenchmarkIndexMillion; the README states the figures.
package content
