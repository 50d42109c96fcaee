// Package zones reads dnsd's configuration and RFC 1035 zone files into
// immutable, validated values: the Config, its Zones indexed for lookup, and
// the groups with their members. Every error names the file, the line and
// the object it is about.
package zones
