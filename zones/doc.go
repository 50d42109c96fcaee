// Package zones reads dnsd's configuration and RFC 1035 zone files into
// immutable, validated values: the Config, its Zones indexed for lookup, and
// the groups with their members. Every error names the file, the line and
// the object it is about.
//
// The YAML decoding, the error collector and the value types that dnsd's
// config shares with the mirror's (durations, locations, the geo block)
// are the config layer's, zones/yamlconf; zones adds what is dnsd's own.
package zones
